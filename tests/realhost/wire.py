"""Shared shapes of the two wire dialects: a parsed request and an HTTP response."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["anthropic", "openai"]
"""Which API a request spoke: Anthropic Messages or OpenAI chat completions."""

_MARKER = re.compile(r"\[script:([A-Za-z0-9_.:/\-]+)\]")
_WORKDIR = re.compile(r"(?:Primary working directory|Working directory)\s*:\s*(/[^\s<>\"']*)")


@dataclass(frozen=True)
class ParsedRequest:
    """What the mock needs to know about one model request, whichever API it spoke."""

    api: Api
    """The dialect."""
    model: str | None
    """The ``model`` field."""
    stream: bool
    """Whether the client asked for server-sent events."""
    tool_names: tuple[str, ...]
    """Names of the tools offered, in request order."""
    tool_params: Mapping[str, Sequence[str]]
    """Declared argument names of each tool."""
    tool_results: int
    """How many tool results the conversation already holds (the script step)."""
    user_texts: tuple[str, ...]
    """Every user-authored text part (not tool results), in order."""
    system_text: str
    """The system prompt, joined with newlines."""

    @property
    def script_name(self) -> str | None:
        """Return the ``[script:NAME]`` marker of the prompt, if any."""
        match = _MARKER.search(self.user_text)
        return match.group(1) if match else None

    @property
    def user_text(self) -> str:
        """Return all user-authored text joined with newlines."""
        return "\n".join(self.user_texts)

    @property
    def workdir(self) -> str | None:
        """Return the working directory the system prompt (or a system reminder) announces."""
        match = _WORKDIR.search(self.system_text) or _WORKDIR.search(self.user_text)
        return match.group(1).rstrip(".,;") if match else None


@dataclass(frozen=True)
class Response:
    """An HTTP response ready to send."""

    status: int
    """HTTP status code."""
    body: bytes
    """The complete body (SSE bodies are sent whole, with a Content-Length)."""
    content_type: str = "application/json"
    """The Content-Type header."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra headers."""


def json_response(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> Response:
    """Return a JSON response."""
    return Response(status, json.dumps(payload).encode(), headers=dict(headers or {}))


def sse(events: Sequence[tuple[str | None, Any]]) -> bytes:
    """Encode ``(event name, data)`` pairs as a server-sent-events body; str data is sent raw."""
    out: list[str] = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def new_id(prefix: str) -> str:
    """Return a fresh identifier such as ``msg_mock_1a2b...``."""
    return f"{prefix}_mock_{uuid.uuid4().hex[:20]}"


def retry_headers(retry_after_ms: int | None) -> dict[str, str]:
    """Return the retry hint headers for an error response."""
    if retry_after_ms is None:
        return {}
    return {
        "retry-after-ms": str(retry_after_ms),
        "retry-after": str(max(1, -(-retry_after_ms // 1000))),
    }
