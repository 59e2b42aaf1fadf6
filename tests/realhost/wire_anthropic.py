"""The Anthropic Messages API as Claude Code uses it: parse requests, render replies."""

from __future__ import annotations

import json
from typing import Any

from .script import ToolCallSpec, Usage
from .wire import ParsedRequest, Response, json_response, new_id, retry_headers, sse

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
"""Anthropic's ``error.type`` for each status code (others get ``api_error``)."""


def _text_of(content: Any) -> list[str]:
    """Return the text parts of a message ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]


def parse(body: dict[str, Any]) -> ParsedRequest:
    """Read what the mock needs from a ``POST /v1/messages`` body."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    names = tuple(str(t.get("name")) for t in tools)
    params = {
        str(t.get("name")): tuple((t.get("input_schema") or {}).get("properties") or {})
        for t in tools
    }
    user_text: list[str] = []
    # Claude Code 2.1.3xx also sends role "system" messages (the environment block).
    system_text = _text_of(body.get("system"))
    tool_results = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "system":
            system_text += _text_of(content)
        if message.get("role") != "user":
            continue
        user_text += _text_of(content)
        if isinstance(content, list):
            tool_results += sum(
                1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
            )
    return ParsedRequest(
        api="anthropic",
        model=body.get("model"),
        stream=bool(body.get("stream")),
        tool_names=names,
        tool_params=params,
        tool_results=tool_results,
        user_texts=tuple(user_text),
        system_text="\n".join(system_text),
    )


def _usage(usage: Usage, *, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }


def _block(content: str | ToolCallSpec) -> dict[str, Any]:
    if isinstance(content, ToolCallSpec):
        return {
            "type": "tool_use",
            "id": new_id("toolu"),
            "name": content.name,
            "input": content.arguments,
        }
    return {"type": "text", "text": content}


def render(
    content: str | ToolCallSpec, *, model: str, usage: Usage, stream: bool, request_id: str
) -> Response:
    """Render one assistant message holding a text block or a tool_use block."""
    block = _block(content)
    stop_reason = "tool_use" if block["type"] == "tool_use" else "end_turn"
    message = {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": _usage(usage, output_tokens=usage.output_tokens),
    }
    headers = {"request-id": request_id}
    if not stream:
        return json_response(200, message, headers)
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = _usage(usage, output_tokens=min(1, usage.output_tokens))
    if block["type"] == "tool_use":
        opening: dict[str, Any] = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        opening = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": opening},
        ),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": _usage(usage, output_tokens=usage.output_tokens),
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return Response(200, sse(events), "text/event-stream", headers)


def render_error(status: int, message: str, *, retry_after_ms: int | None) -> Response:
    """Render an error in Anthropic's format: ``{"type": "error", "error": {...}}``."""
    payload = {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
    }
    return json_response(status, payload, retry_headers(retry_after_ms))


def count_tokens(body: dict[str, Any]) -> Response:
    """Answer ``POST /v1/messages/count_tokens`` with a rough estimate (4 bytes a token)."""
    size = len(str(body.get("messages", ""))) + len(str(body.get("system", "")))
    return json_response(200, {"input_tokens": max(1, size // 4)})


def models(model_ids: list[str]) -> Response:
    """Answer ``GET /v1/models`` in Anthropic's list format."""
    data = [
        {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
        for m in model_ids
    ]
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return json_response(200, {"data": data, "has_more": False, "first_id": first, "last_id": last})
