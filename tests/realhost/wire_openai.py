"""OpenAI chat completions as OpenCode's openai-compatible provider uses them."""

from __future__ import annotations

import json
import time
from typing import Any

from .script import ToolCallSpec, Usage
from .wire import ParsedRequest, Response, json_response, new_id, retry_headers, sse

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}
"""OpenAI's ``error.type`` for each status code (others get ``server_error``)."""


def _text_of(content: Any) -> list[str]:
    """Return the text parts of a message ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]


def parse(body: dict[str, Any]) -> ParsedRequest:
    """Read what the mock needs from a ``POST /v1/chat/completions`` body."""
    functions = [t.get("function") or {} for t in body.get("tools") or [] if isinstance(t, dict)]
    names = tuple(str(f.get("name")) for f in functions)
    params = {
        str(f.get("name")): tuple((f.get("parameters") or {}).get("properties") or {})
        for f in functions
    }
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    return ParsedRequest(
        api="openai",
        model=body.get("model"),
        stream=bool(body.get("stream")),
        tool_names=names,
        tool_params=params,
        tool_results=sum(1 for m in messages if m.get("role") == "tool"),
        user_texts=tuple(
            t for m in messages if m.get("role") == "user" for t in _text_of(m.get("content"))
        ),
        system_text="\n".join(
            t for m in messages if m.get("role") == "system" for t in _text_of(m.get("content"))
        ),
    )


def _usage(usage: Usage) -> dict[str, Any]:
    prompt = usage.input_tokens + usage.cache_read_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
    }


def render(
    content: str | ToolCallSpec, *, model: str, usage: Usage, stream: bool, request_id: str
) -> Response:
    """Render one completion holding text or a single tool call."""
    base = {"id": request_id, "created": int(time.time()), "model": model}
    if isinstance(content, ToolCallSpec):
        call = {
            "id": new_id("call"),
            "type": "function",
            "function": {"name": content.name, "arguments": json.dumps(content.arguments)},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
        delta: dict[str, Any] = {"tool_calls": [{"index": 0, **call}]}
    else:
        message = {"role": "assistant", "content": content}
        finish = "stop"
        delta = {"content": content}
    if not stream:
        choice = {"index": 0, "message": message, "finish_reason": finish}
        payload = {**base, "object": "chat.completion", "choices": [choice], "usage": _usage(usage)}
        return json_response(200, payload)
    chunk = {**base, "object": "chat.completion.chunk"}

    def choice_chunk(d: dict[str, Any], reason: str | None) -> dict[str, Any]:
        return {**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": reason}]}

    events: list[tuple[str | None, Any]] = [
        (None, choice_chunk({"role": "assistant", "content": ""}, None)),
        (None, choice_chunk(delta, None)),
        (None, choice_chunk({}, finish)),
        (None, {**chunk, "choices": [], "usage": _usage(usage)}),
        (None, "[DONE]"),
    ]
    return Response(200, sse(events), "text/event-stream")


def render_error(status: int, message: str, *, retry_after_ms: int | None) -> Response:
    """Render an error in OpenAI's format: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = ERROR_TYPES.get(status, "server_error")
    payload = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return json_response(status, payload, retry_headers(retry_after_ms))


def models(model_ids: list[str]) -> Response:
    """Answer ``GET /v1/models`` in OpenAI's list format."""
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "mock"} for m in model_ids]
    return json_response(200, {"object": "list", "data": data})
