"""The gateway's meters read each provider's answers, however they are cut into chunks."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from realhost import wire_anthropic, wire_openai
from realhost.script import ToolCallSpec, Usage

from atlante_eval.gateway.metering import (
    EVENT_BYTES,
    TOOL_CALLS_LIMIT,
    CallMeter,
    api_of,
)
from atlante_eval.gateway.prices import price_of

WRITE = ToolCallSpec("Write", {"file_path": "/w/a.txt", "content": "hi"})
USAGE = Usage(input_tokens=1200, output_tokens=34, cache_read_tokens=56, cache_write_tokens=78)


def _meter(api: str, body: bytes, *, streamed: bool, chunks: list[int] | None = None) -> CallMeter:
    meter = CallMeter(api_of(api), streamed=streamed)
    start = 0
    for size in chunks or [len(body)]:
        meter.feed(body[start : start + size])
        start += size
    meter.feed(body[start:])
    meter.end()
    return meter


def _anthropic(content: str | ToolCallSpec, *, stream: bool) -> bytes:
    return wire_anthropic.render(
        content, model="claude-sonnet-4-5", usage=USAGE, stream=stream, request_id="r"
    ).body


def _chat(content: str | ToolCallSpec, *, stream: bool) -> bytes:
    return wire_openai.render(
        content, model="gpt-4.1", usage=USAGE, stream=stream, request_id="r"
    ).body


def test_the_api_is_read_from_the_path() -> None:
    """Messages, Chat Completions and Responses by path suffix; anything else is unknown."""
    assert api_of("/v1/messages?beta=true") == "anthropic-messages"
    assert api_of("/api/v1/chat/completions") == "openai-chat"
    assert api_of("/v1/responses/") == "openai-responses"
    assert api_of("/v1/messages/count_tokens") == "unknown"
    assert api_of("/v1beta/models/gemini:generateContent") == "unknown"


@pytest.mark.parametrize("stream", [True, False])
def test_an_anthropic_answer_gives_usage_model_stop_and_tool_calls(stream: bool) -> None:
    """Streaming or not: the four counts, the served model, the stop reason, the Write call."""
    meter = _meter("/v1/messages", _anthropic(WRITE, stream=stream), streamed=stream)
    figures = meter.figures
    assert not meter.unreadable
    assert (figures.input_tokens, figures.output_tokens) == (1200, 34)
    assert (figures.cache_read_tokens, figures.cache_write_tokens) == (56, 78)
    assert figures.tokens == 1200 + 34 + 56 + 78
    assert figures.model == "claude-sonnet-4-5"
    assert figures.stop_reason == "tool_use"
    [tool] = figures.tools
    assert (tool.name, tool.value()) == ("Write", {"file_path": "/w/a.txt", "content": "hi"})
    assert tool.id is not None
    assert tool.id.startswith("toolu_")


@given(cuts=st.lists(st.integers(min_value=1, max_value=97), max_size=40))
def test_any_chunking_of_a_stream_gives_the_same_figures(cuts: list[int]) -> None:
    """SSE events split anywhere across chunks (mid-line, mid-UTF-8) read the same."""
    body = _anthropic(WRITE, stream=True)
    whole = _meter("/v1/messages", body, streamed=True).figures
    pieces = _meter("/v1/messages", body, streamed=True, chunks=cuts).figures
    assert pieces.tokens == whole.tokens == 1368
    assert [t.value() for t in pieces.tools] == [t.value() for t in whole.tools]


def test_the_input_count_is_known_as_soon_as_the_message_starts() -> None:
    """message_start alone already carries the input and cache counts (the budget binds)."""
    body = _anthropic("hello", stream=True)
    first_event = body[: body.index(b"\n\n") + 2]
    meter = CallMeter("anthropic-messages", streamed=True)
    meter.feed(first_event)
    assert meter.figures.tokens == 1200 + 1 + 56 + 78


def test_a_later_lower_count_never_lowers_a_figure() -> None:
    """A message_delta with a smaller count (a replayed or forged event) changes nothing."""
    meter = CallMeter("anthropic-messages", streamed=True)
    events = [
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 500}}},
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 40}},
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 3, "input_tokens": -9}},
    ]
    meter.feed(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events))
    assert (meter.figures.input_tokens, meter.figures.output_tokens) == (500, 40)


@pytest.mark.parametrize("stream", [True, False])
def test_a_chat_completion_gives_usage_with_cached_tokens_apart(stream: bool) -> None:
    """prompt_tokens includes the cached ones: input is the rest, cache read the cached."""
    meter = _meter("/v1/chat/completions", _chat(WRITE, stream=stream), streamed=stream)
    figures = meter.figures
    assert (figures.input_tokens, figures.cache_read_tokens) == (1200, 56)
    assert figures.output_tokens == 34
    assert figures.tokens == 1200 + 56 + 34
    assert figures.stop_reason == "tool_calls"
    [tool] = figures.tools
    assert tool.name == "Write"
    assert tool.value() == {"file_path": "/w/a.txt", "content": "hi"}


def test_chat_tool_calls_arriving_in_pieces_are_joined_by_index() -> None:
    """Two calls whose name, id and arguments arrive over several chunks."""
    pieces: list[dict[str, Any]] = [
        {"index": 0, "id": "call_a", "function": {"name": "bash", "arguments": '{"comm'}},
        {"index": 1, "id": "call_b", "function": {"name": "write", "arguments": "{}"}},
        {"index": 0, "function": {"arguments": 'and": "ls"}'}},
    ]
    chunks: list[dict[str, Any]] = [{"choices": [{"delta": {"tool_calls": [p]}}]} for p in pieces]
    chunks.append({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    figures = _meter("/chat/completions", body.encode(), streamed=True).figures
    assert [(t.id, t.name, t.value()) for t in figures.tools] == [
        ("call_a", "bash", {"command": "ls"}),
        ("call_b", "write", {}),
    ]
    assert figures.tokens == 12


def _responses_stream() -> bytes:
    call = {"type": "function_call", "call_id": "call_r1", "name": "shell", "arguments": '{"a":1}'}
    response = {
        "model": "gpt-5",
        "status": "completed",
        "output": [call],
        "usage": {
            "input_tokens": 900,
            "output_tokens": 20,
            "input_tokens_details": {"cached_tokens": 100},
        },
    }
    events = [
        {"type": "response.created", "response": {"model": "gpt-5"}},
        {"type": "response.output_item.done", "item": call},
        {"type": "response.completed", "response": response},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def test_a_responses_stream_gives_usage_and_each_function_call_once() -> None:
    """response.completed's usage; the call seen in the item and the response is counted once."""
    figures = _meter("/v1/responses", _responses_stream(), streamed=True).figures
    assert (figures.input_tokens, figures.cache_read_tokens, figures.output_tokens) == (
        800,
        100,
        20,
    )
    assert figures.model == "gpt-5"
    assert figures.stop_reason == "tool_calls"
    assert [(t.id, t.name, t.value()) for t in figures.tools] == [("call_r1", "shell", {"a": 1})]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_answer_is_read(encoding: str) -> None:
    """gzip and deflate bodies are inflated for the meter (in bounded steps)."""
    body = _anthropic(WRITE, stream=True)
    packed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    meter = CallMeter("anthropic-messages", streamed=True, encoding=encoding)
    for start in range(0, len(packed), 7):
        meter.feed(packed[start : start + 7])
    meter.end()
    assert not meter.unreadable
    assert meter.figures.tokens == 1368


def test_what_the_meter_cannot_read_is_unreadable() -> None:
    """An unknown API, an unknown encoding, a broken body or an oversized answer."""
    assert CallMeter("unknown", streamed=True).unreadable
    assert CallMeter("anthropic-messages", streamed=True, encoding="br").unreadable
    broken = CallMeter("anthropic-messages", streamed=False)
    broken.feed(b"{not json")
    broken.end()
    assert broken.unreadable
    gz = CallMeter("anthropic-messages", streamed=True, encoding="gzip")
    gz.feed(b"not gzip at all")
    assert gz.unreadable


def test_an_oversized_event_is_skipped_and_the_next_one_read() -> None:
    """One event beyond EVENT_BYTES is dropped (bounded memory); the stream reads on."""
    meter = CallMeter("anthropic-messages", streamed=True)
    meter.feed(b"data: " + b"x" * (EVENT_BYTES + 10))
    meter.feed(b"y" * 1000 + b"\n\n")
    start = {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 7}}}
    meter.feed(f"data: {json.dumps(start)}\n\n".encode())
    meter.end()
    assert meter.figures.input_tokens == 7
    assert len(meter._buffer) == 0


def test_tool_calls_beyond_the_cap_are_counted() -> None:
    """At most TOOL_CALLS_LIMIT calls are kept per answer; the rest are counted."""
    content = [
        {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}}
        for n in range(TOOL_CALLS_LIMIT + 5)
    ]
    body = json.dumps({"model": "m", "content": content, "usage": {"input_tokens": 1}})
    figures = _meter("/v1/messages", body.encode(), streamed=False).figures
    assert (len(figures.tools), figures.tools_omitted) == (TOOL_CALLS_LIMIT, 5)


def test_prices_match_the_longest_known_model_id() -> None:
    """Dated ids and provider prefixes price as their family; an unknown model has no price."""
    sonnet = price_of("anthropic/claude-sonnet-4-5-20250929")
    assert sonnet is not None
    assert sonnet.cost(
        input_tokens=1_000_000, output_tokens=1_000_000, cache_read=0, cache_write=0
    ) == pytest.approx(18.0)
    mini = price_of("gpt-5-mini")
    assert mini is not None
    assert mini.output == 2.0  # gpt-5-mini, not gpt-5
    assert price_of("us.anthropic.claude-haiku-4-5") is not None
    assert price_of("mock-model") is None
    assert price_of(None) is None
