"""Read a provider's answer as it streams: usage, the model served, the tool calls asked for.

One :class:`CallMeter` per model call is fed the answer's body (decoded from its
``Content-Encoding``) chunk by chunk, before the chunk reaches the host. It
understands three wire formats, each streaming (server-sent events) and not:

* Anthropic Messages (``.../messages``): ``message_start`` carries the model,
  the input and cache tokens and a first output count; each ``message_delta``
  carries the cumulative output count (newer versions the cumulative input and
  cache counts too); ``content_block_start``/``input_json_delta`` carry tool calls.
* OpenAI Chat Completions (``.../chat/completions``): the usage is in the last
  chunk (``stream_options.include_usage``); ``prompt_tokens`` includes the cached
  tokens (``prompt_tokens_details.cached_tokens``); tool calls arrive in pieces by
  ``index``.
* OpenAI Responses (``.../responses``): ``response.completed`` (or
  ``response.incomplete``) carries the usage; ``function_call`` output items the
  tool calls.

Every figure only grows, and :attr:`CallFigures.tokens` is input + output +
cache read + cache write, the way both hosts count. Nothing here does I/O; every
buffer is bounded (an event, a tool call's arguments, the number of tool calls).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..transcript.model_calls import ModelApi

__all__ = [
    "EVENT_BYTES",
    "JSON_BYTES",
    "TOOL_ARGUMENT_CHARS",
    "TOOL_CALLS_LIMIT",
    "CallFigures",
    "CallMeter",
    "RequestedTool",
    "api_of",
]

#: Longest server-sent event the meter reads (longer ones are skipped).
EVENT_BYTES = 4 * 1024 * 1024
#: Longest non-streaming answer the meter reads (a longer one is unreadable).
JSON_BYTES = 32 * 1024 * 1024
#: Longest arguments text of one tool call kept (longer ones are kept as a preview).
TOOL_ARGUMENT_CHARS = 256 * 1024
#: Most tool calls of one answer kept (the rest are counted).
TOOL_CALLS_LIMIT = 64
_INFLATE_STEP = 1024 * 1024

_PATHS: tuple[tuple[str, ModelApi], ...] = (
    ("/messages", "anthropic-messages"),
    ("/chat/completions", "openai-chat"),
    ("/responses", "openai-responses"),
)


def api_of(path: str) -> ModelApi:
    """The API a request speaks, from its path (the query string excluded)."""
    trimmed = path.split("?", 1)[0].rstrip("/")
    for suffix, api in _PATHS:
        if trimmed.endswith(suffix):
            return api
    return "unknown"


@dataclass
class RequestedTool:
    """A tool call the model asked for, its arguments as they arrived."""

    id: str | None
    name: str
    arguments: str = ""
    """The arguments' JSON text (capped at :data:`TOOL_ARGUMENT_CHARS`)."""
    parsed: Any = None
    """The arguments as a value when they arrived whole (a non-streaming answer)."""
    cut: int = 0
    """Characters of arguments left out."""

    def add(self, text: str) -> None:
        """Append a piece of the arguments."""
        room = TOOL_ARGUMENT_CHARS - len(self.arguments)
        self.arguments += text[: max(0, room)]
        self.cut += max(0, len(text) - max(0, room))

    def value(self) -> Any:
        """The arguments as a JSON value (text kept as it came when it is not JSON)."""
        if self.parsed is not None:
            return self.parsed
        if self.cut:
            return {"truncated": len(self.arguments) + self.cut, "preview": self.arguments[:512]}
        if not self.arguments:
            return {}
        try:
            return json.loads(self.arguments)
        except (ValueError, RecursionError):
            return self.arguments


@dataclass
class CallFigures:
    """What one answer said about itself."""

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    stop_reason: str | None = None
    tools: list[RequestedTool] = field(default_factory=list)
    tools_omitted: int = 0
    error: str | None = None
    """The provider's error message, when the answer is one."""

    @property
    def tokens(self) -> int | None:
        """All four counts summed (``None``: the answer carried no usage)."""
        parts = (
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
        )
        if all(p is None for p in parts):
            return None
        return sum(p or 0 for p in parts)

    def raise_to(self, name: str, value: object) -> None:
        """Set count ``name`` to ``value`` unless that would lower it (or it is no count)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return
        current = getattr(self, name)
        if current is None or value > current:
            setattr(self, name, value)

    def tool(self, call_id: object, name: object) -> RequestedTool | None:
        """Start a tool call (``None`` once :data:`TOOL_CALLS_LIMIT` are kept)."""
        if len(self.tools) >= TOOL_CALLS_LIMIT:
            self.tools_omitted += 1
            return None
        tool = RequestedTool(
            id=call_id if isinstance(call_id, str) and call_id else None,
            name=name if isinstance(name, str) and name else "unknown",
        )
        self.tools.append(tool)
        return tool


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


# -- Anthropic Messages ---------------------------------------------------------------


class _Anthropic:
    """Anthropic Messages events (and the whole message of a non-streaming answer)."""

    def __init__(self, figures: CallFigures) -> None:
        self.figures = figures
        self._blocks: dict[int, RequestedTool] = {}

    def usage(self, usage: object) -> None:
        data = _dict(usage)
        self.figures.raise_to("input_tokens", data.get("input_tokens"))
        self.figures.raise_to("output_tokens", data.get("output_tokens"))
        self.figures.raise_to("cache_read_tokens", data.get("cache_read_input_tokens"))
        self.figures.raise_to("cache_write_tokens", data.get("cache_creation_input_tokens"))

    def event(self, data: Mapping[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start":
            message = _dict(data.get("message"))
            self.figures.model = _str(message.get("model")) or self.figures.model
            self.usage(message.get("usage"))
        elif kind == "content_block_start":
            block = _dict(data.get("content_block"))
            index = data.get("index")
            if block.get("type") == "tool_use" and isinstance(index, int):
                tool = self.figures.tool(block.get("id"), block.get("name"))
                if tool is not None:
                    self._blocks[index] = tool
                    if block.get("input"):
                        tool.parsed = block["input"]
        elif kind == "content_block_delta":
            delta = _dict(data.get("delta"))
            tool = self._blocks.get(data["index"]) if isinstance(data.get("index"), int) else None
            text = delta.get("partial_json")
            if (
                tool is not None
                and delta.get("type") == "input_json_delta"
                and isinstance(text, str)
            ):
                tool.parsed = None
                tool.add(text)
        elif kind == "message_delta":
            stop = _str(_dict(data.get("delta")).get("stop_reason"))
            self.figures.stop_reason = stop or self.figures.stop_reason
            self.usage(data.get("usage"))
        elif kind == "error":
            error = _dict(data.get("error"))
            self.figures.error = _str(error.get("message")) or "error"

    def whole(self, data: Mapping[str, Any]) -> None:
        if data.get("type") == "error":
            self.event(data)
            return
        self.figures.model = _str(data.get("model"))
        self.figures.stop_reason = _str(data.get("stop_reason"))
        self.usage(data.get("usage"))
        content = data.get("content")
        for block in content if isinstance(content, list) else []:
            block = _dict(block)
            if block.get("type") == "tool_use":
                tool = self.figures.tool(block.get("id"), block.get("name"))
                if tool is not None:
                    tool.parsed = block.get("input", {})


# -- OpenAI Chat Completions ----------------------------------------------------------


class _Chat:
    """Chat Completions chunks (and the whole completion of a non-streaming answer)."""

    def __init__(self, figures: CallFigures) -> None:
        self.figures = figures
        self._calls: dict[int, RequestedTool] = {}

    def usage(self, usage: object) -> None:
        data = _dict(usage)
        prompt, cached = data.get("prompt_tokens"), _dict(data.get("prompt_tokens_details"))
        read = cached.get("cached_tokens")
        read = read if isinstance(read, int) and not isinstance(read, bool) else 0
        if isinstance(prompt, int) and not isinstance(prompt, bool):
            self.figures.raise_to("input_tokens", max(0, prompt - read))
            self.figures.raise_to("cache_read_tokens", read)
        self.figures.raise_to("output_tokens", data.get("completion_tokens"))

    def event(self, data: Mapping[str, Any]) -> None:
        self.figures.model = _str(data.get("model")) or self.figures.model
        if data.get("usage"):
            self.usage(data["usage"])
        error = data.get("error")
        if isinstance(error, dict):
            self.figures.error = _str(error.get("message")) or "error"
        choices = data.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            choice = _dict(choice)
            self.figures.stop_reason = _str(choice.get("finish_reason")) or self.figures.stop_reason
            calls = _dict(choice.get("delta")).get("tool_calls")
            for piece in calls if isinstance(calls, list) else []:
                self._piece(_dict(piece))

    def _piece(self, piece: Mapping[str, Any]) -> None:
        index = piece.get("index", 0)
        function = _dict(piece.get("function"))
        tool = self._calls.get(index) if isinstance(index, int) else None
        if tool is None and isinstance(index, int):
            tool = self.figures.tool(piece.get("id"), function.get("name"))
            if tool is None:
                return
            self._calls[index] = tool
        if tool is None:
            return
        if tool.id is None and _str(piece.get("id")):
            tool.id = piece["id"]
        if tool.name == "unknown" and _str(function.get("name")):
            tool.name = function["name"]
        if isinstance(function.get("arguments"), str):
            tool.add(function["arguments"])

    def whole(self, data: Mapping[str, Any]) -> None:
        self.figures.model = _str(data.get("model"))
        self.usage(data.get("usage"))
        error = data.get("error")
        if isinstance(error, dict):
            self.figures.error = _str(error.get("message")) or "error"
        choices = data.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            choice = _dict(choice)
            self.figures.stop_reason = _str(choice.get("finish_reason")) or self.figures.stop_reason
            calls = _dict(choice.get("message")).get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                call = _dict(call)
                function = _dict(call.get("function"))
                tool = self.figures.tool(call.get("id"), function.get("name"))
                if tool is not None and isinstance(function.get("arguments"), str):
                    tool.add(function["arguments"])


# -- OpenAI Responses -----------------------------------------------------------------


class _Responses:
    """Responses API events (and the whole response of a non-streaming answer)."""

    def __init__(self, figures: CallFigures) -> None:
        self.figures = figures
        self._seen: set[str] = set()

    def usage(self, usage: object) -> None:
        data = _dict(usage)
        total_in = data.get("input_tokens")
        read = _dict(data.get("input_tokens_details")).get("cached_tokens")
        read = read if isinstance(read, int) and not isinstance(read, bool) else 0
        if isinstance(total_in, int) and not isinstance(total_in, bool):
            self.figures.raise_to("input_tokens", max(0, total_in - read))
            self.figures.raise_to("cache_read_tokens", read)
        self.figures.raise_to("output_tokens", data.get("output_tokens"))

    def _item(self, item: Mapping[str, Any]) -> None:
        if item.get("type") != "function_call":
            return
        key = _str(item.get("call_id")) or _str(item.get("id")) or str(len(self._seen))
        if key in self._seen:
            return
        self._seen.add(key)
        tool = self.figures.tool(item.get("call_id") or item.get("id"), item.get("name"))
        if tool is not None and isinstance(item.get("arguments"), str):
            tool.add(item["arguments"])

    def event(self, data: Mapping[str, Any]) -> None:
        kind = data.get("type")
        if kind == "response.output_item.done":
            self._item(_dict(data.get("item")))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.whole(_dict(data.get("response")))
        elif kind == "response.created":
            self.figures.model = _str(_dict(data.get("response")).get("model"))
        elif kind == "error":
            self.figures.error = _str(data.get("message")) or "error"

    def whole(self, data: Mapping[str, Any]) -> None:
        self.figures.model = _str(data.get("model")) or self.figures.model
        self.usage(data.get("usage"))
        output = data.get("output")
        for item in output if isinstance(output, list) else []:
            self._item(_dict(item))
        reason = _str(_dict(data.get("incomplete_details")).get("reason"))
        calls = any(t for t in self.figures.tools)
        self.figures.stop_reason = reason or ("tool_calls" if calls else _str(data.get("status")))
        error = _dict(data.get("error"))
        if error:
            self.figures.error = _str(error.get("message")) or "error"


_Dialect = _Anthropic | _Chat | _Responses
_DIALECTS: dict[str, type[_Dialect]] = {
    "anthropic-messages": _Anthropic,
    "openai-chat": _Chat,
    "openai-responses": _Responses,
}


class CallMeter:
    """Reads one answer's body as it streams (see the module docstring)."""

    def __init__(self, api: ModelApi, *, streamed: bool, encoding: str | None = None) -> None:
        """Meter an answer of ``api``.

        Args:
            api: the request's API (``unknown``: nothing is read).
            streamed: whether the answer is server-sent events.
            encoding: its ``Content-Encoding`` (``gzip``, ``deflate`` or none).
        """
        self.figures = CallFigures()
        self.streamed = streamed
        self._dialect: _Dialect | None = _DIALECTS[api](self.figures) if api in _DIALECTS else None
        self._inflate = _decoder(encoding)
        self._buffer = bytearray()
        self._skipping = False
        self._data: list[bytes] = []
        self._data_size = 0
        self.unreadable = self._dialect is None or self._inflate is False
        """Whether the answer cannot be read (an unknown API, encoding or shape)."""

    def feed(self, chunk: bytes) -> None:
        """Read the next piece of the body (as it came off the wire)."""
        if self.unreadable:
            return
        if self._inflate is None:
            self._take(chunk)
            return
        try:  # in bounded pieces: a small compressed body may inflate to a huge one
            piece = self._inflate.decompress(chunk, _INFLATE_STEP)
            self._take(piece)
            while self._inflate.unconsumed_tail and not self.unreadable:
                piece = self._inflate.decompress(self._inflate.unconsumed_tail, _INFLATE_STEP)
                self._take(piece)
        except zlib.error:
            self.unreadable = True

    def _take(self, chunk: bytes) -> None:
        if not self.streamed:
            if len(self._buffer) + len(chunk) > JSON_BYTES:
                self.unreadable = True
                self._buffer.clear()
                return
            self._buffer += chunk
            return
        self._lines(chunk)

    def end(self) -> None:
        """The body is complete: read a non-streaming answer, dispatch a last event."""
        if self.unreadable or self._dialect is None:
            return
        if not self.streamed:
            try:
                data = json.loads(bytes(self._buffer))
            except (ValueError, RecursionError):
                self.unreadable = True
                return
            finally:
                self._buffer.clear()
            if isinstance(data, dict):
                self._dialect.whole(data)
            return
        if self._buffer:
            self._line(bytes(self._buffer))
            self._buffer.clear()
        self._dispatch()

    # -- server-sent events -----------------------------------------------------------

    def _lines(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            piece = chunk[start:end]
            start = end + 1
            if self._skipping:
                self._skipping = False
                self._buffer.clear()
                continue
            if self._buffer:
                self._buffer += piece
                piece = bytes(self._buffer)
                self._buffer.clear()
            self._line(piece)
        rest = chunk[start:]
        if not self._skipping and len(self._buffer) + len(rest) > EVENT_BYTES:
            self._skipping = True
            self._buffer.clear()
        elif not self._skipping:
            self._buffer += rest

    def _line(self, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if not line:
            self._dispatch()
        elif line.startswith(b"data:"):
            data = line[5:]
            data = data[1:] if data.startswith(b" ") else data
            if self._data_size + len(data) <= EVENT_BYTES:
                self._data.append(data)
                self._data_size += len(data)

    def _dispatch(self) -> None:
        if not self._data or self._dialect is None:
            self._data.clear()
            return
        payload = b"\n".join(self._data)
        self._data.clear()
        self._data_size = 0
        if payload.strip() == b"[DONE]":
            return
        try:
            event = json.loads(payload)
        except (ValueError, RecursionError):
            return
        if isinstance(event, dict):
            self._dialect.event(event)


def _decoder(encoding: str | None) -> Any:
    """A zlib decoder for ``encoding``, ``None`` for identity, ``False`` when unreadable."""
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS | 32)
    return False
