"""The mock model server speaks both wire dialects and follows its scripts (no real CLI needed)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .mock_model import (
    CallTool,
    Fail,
    MockModelServer,
    Reply,
    RunBash,
    Script,
    Usage,
    WriteFile,
)

CLAUDE_TOOLS = [
    {"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}}},
    {"name": "Bash", "input_schema": {"properties": {"command": {}, "description": {}}}},
]
OPENCODE_TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"properties": {p: {}}}}}
    for n, p in (("write", "filePath"), ("bash", "command"))
]


def post(mock: MockModelServer, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    """POST ``body`` as JSON to the mock; return status, headers and body."""
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def sse_data(raw: bytes) -> list[Any]:
    """Return the ``data:`` payloads of an SSE body, JSON-decoded where possible."""
    out: list[Any] = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def claude_request(prompt: str, *, tool_results: int = 0, stream: bool = True) -> dict[str, Any]:
    """Return a Claude-Code-like Messages request with ``tool_results`` tool results."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
        {"role": "system", "content": "Primary working directory: /work/sandbox\n"},
    ]
    for i in range(tool_results):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}"}]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}"}]}
        )
    return {"model": "m", "stream": stream, "tools": CLAUDE_TOOLS, "messages": messages}


def opencode_request(prompt: str, *, tool_results: int = 0, stream: bool = True) -> dict[str, Any]:
    """Return an OpenCode-like chat completions request."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Working directory: /oc/work\n"},
        {"role": "user", "content": prompt},
    ]
    messages += [
        {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(tool_results)
    ]
    return {"model": "m", "stream": stream, "tools": OPENCODE_TOOLS, "messages": messages}


@pytest.fixture
def mock() -> Iterator[MockModelServer]:
    """Yield a running mock with a write-bash-reply script named ``s``."""
    script = Script(
        "s",
        [
            WriteFile("a.txt", "A", usage=Usage(11, 22, 33, 44)),
            RunBash("ls", usage=Usage(1, 2)),
            Reply("done", usage=Usage(5, 6)),
        ],
    )
    with MockModelServer([script]) as server:
        yield server


def test_anthropic_stream_writes_with_claude_names(mock: MockModelServer) -> None:
    """A Claude request gets an SSE tool_use for Write with an absolute file_path and usage."""
    status, headers, body = post(mock, "/v1/messages?beta=true", claude_request("go [script:s]"))
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    events = sse_data(body)
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0]["message"]["usage"]["input_tokens"] == 11
    assert events[1]["content_block"]["name"] == "Write"
    arguments = json.loads(events[3]["delta"]["partial_json"])
    assert arguments == {"file_path": "/work/sandbox/a.txt", "content": "A"}
    assert events[5]["delta"]["stop_reason"] == "tool_use"
    assert events[5]["usage"] == {
        "input_tokens": 11,
        "output_tokens": 22,
        "cache_read_input_tokens": 33,
        "cache_creation_input_tokens": 44,
    }
    [record] = mock.requests
    assert (record.kind, record.api, record.client, record.script, record.step) == (
        "main",
        "anthropic",
        "claude",
        "s",
        0,
    )
    assert record.query == {"beta": ["true"]}
    assert record.user_texts == ("go [script:s]",)


def test_step_follows_tool_results_and_bash_sends_declared_args(mock: MockModelServer) -> None:
    """The step is the tool-result count; Bash gets ``description`` only if declared."""
    _, _, body = post(mock, "/v1/messages", claude_request("[script:s]", tool_results=1))
    start, delta = sse_data(body)[1:4:2]
    assert start["content_block"]["name"] == "Bash"
    assert json.loads(delta["delta"]["partial_json"]) == {
        "command": "ls",
        "description": "Run a command",
    }
    _, _, body = post(mock, "/v1/chat/completions", opencode_request("[script:s]", tool_results=1))
    call = sse_data(body)[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls"}


def test_openai_stream_writes_with_opencode_names(mock: MockModelServer) -> None:
    """An OpenCode request gets chunks with a write tool call, a usage chunk and [DONE]."""
    status, _, body = post(mock, "/v1/chat/completions", opencode_request("x [script:s]"))
    assert status == 200
    chunks = sse_data(body)
    assert chunks[-1] == "[DONE]"
    call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["function"]["name"] == "write"
    assert json.loads(call["function"]["arguments"]) == {
        "filePath": "/oc/work/a.txt",
        "content": "A",
    }
    assert chunks[2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[3]["choices"] == []
    assert chunks[3]["usage"] == {
        "prompt_tokens": 44,
        "completion_tokens": 22,
        "total_tokens": 66,
        "prompt_tokens_details": {"cached_tokens": 33},
    }


def test_non_streaming_replies(mock: MockModelServer) -> None:
    """Requests without ``stream`` get one JSON message in each dialect."""
    _, _, body = post(
        mock, "/v1/messages", claude_request("[script:s]", tool_results=2, stream=False)
    )
    message = json.loads(body)
    assert message["content"] == [{"type": "text", "text": "done"}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["output_tokens"] == 6
    _, _, body = post(
        mock, "/v1/chat/completions", opencode_request("[script:s]", tool_results=2, stream=False)
    )
    completion = json.loads(body)
    assert completion["choices"][0]["message"]["content"] == "done"
    assert completion["usage"]["completion_tokens"] == 6


def test_exhausted_script_and_missing_script(mock: MockModelServer) -> None:
    """Past its last turn a script says so; an unknown script name is a 400."""
    _, _, body = post(
        mock, "/v1/messages", claude_request("[script:s]", tool_results=5, stream=False)
    )
    assert "script finished" in json.loads(body)["content"][0]["text"]
    status, _, body = post(mock, "/v1/messages", claude_request("[script:nope]"))
    assert status == 400
    assert "no script named 'nope'" in json.loads(body)["error"]["message"]
    assert [r.exhausted for r in mock.requests] == [True, False]


def test_side_request_without_tools_gets_plain_text(mock: MockModelServer) -> None:
    """A request offering no tools (OpenCode's title call) is answered with the side reply."""
    body = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "title?"}]}
    _, _, raw = post(mock, "/v1/chat/completions", body)
    assert json.loads(raw)["choices"][0]["message"]["content"] == "Mock title"
    assert mock.requests[0].kind == "side"


@pytest.mark.parametrize(
    ("path", "request_body", "error_type"),
    [
        ("/v1/messages", claude_request("[script:f]"), "overloaded_error"),
        ("/v1/chat/completions", opencode_request("[script:f]"), "server_error"),
    ],
)
def test_errors_use_each_api_format(
    mock: MockModelServer, path: str, request_body: dict[str, Any], error_type: str
) -> None:
    """A Fail turn answers its status, the API's error body and the retry hints."""
    mock.add(Script("f", [Fail(529, "busy", retry_after_ms=1500)]))
    status, headers, body = post(mock, path, request_body)
    assert status == 529
    assert headers["retry-after-ms"] == "1500"
    assert headers["retry-after"] == "2"
    error = json.loads(body)["error"]
    assert (error["type"], error["message"]) == (error_type, "busy")
    assert mock.requests[0].action == "error 529"


def test_call_tool_is_spelled_per_client(mock: MockModelServer) -> None:
    """CallTool sends the Claude or the OpenCode spelling, whichever client asked."""
    read = CallTool(claude=("Read", {"file_path": "/x"}), opencode=("read", {"filePath": "/x"}))
    mock.add(Script("r", [read]))
    _, _, body = post(mock, "/v1/messages", claude_request("[script:r]", stream=False))
    assert json.loads(body)["content"][0]["name"] == "Read"
    _, _, body = post(mock, "/v1/chat/completions", opencode_request("[script:r]", stream=False))
    call = json.loads(body)["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "read", "arguments": '{"filePath": "/x"}'}


def test_default_script_and_fixed_workdir() -> None:
    """A prompt without a marker uses the script named ``default``; Script.workdir wins."""
    script = Script("default", [WriteFile("b.txt", "B")], workdir="/fixed")
    with MockModelServer([script]) as mock:
        _, _, body = post(mock, "/v1/messages", claude_request("no marker", stream=False))
    assert json.loads(body)["content"][0]["input"]["file_path"] == "/fixed/b.txt"


def test_auxiliary_endpoints_and_unknown_paths(mock: MockModelServer) -> None:
    """count_tokens and /v1/models answer; anything else is a logged 404."""
    status, _, body = post(mock, "/v1/messages/count_tokens", {"messages": [{"x": "y" * 40}]})
    assert status == 200
    assert json.loads(body)["input_tokens"] > 0
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        conn.request("GET", "/v1/models")
        assert json.loads(conn.getresponse().read())["data"][0]["id"] == "mock-model"
        conn.request("GET", "/v1/models", headers={"anthropic-version": "2023-06-01"})
        assert json.loads(conn.getresponse().read())["data"][0]["type"] == "model"
        conn.request("GET", "/api/whatever")
        response = conn.getresponse()
        assert response.status == 404
        response.read()
    finally:
        conn.close()
    assert [r.kind for r in mock.requests] == ["count_tokens", "models", "models", "unknown"]


def test_delay_is_applied_and_stop_interrupts_it() -> None:
    """A turn's delay holds the response; stop() does not wait for it."""
    with MockModelServer([Script("slow", [Reply("late", delay=0.3)])]) as mock:
        start = time.monotonic()
        post(mock, "/v1/messages", claude_request("[script:slow]"))
        assert time.monotonic() - start >= 0.3
    # An hour's delay: were stop() to wait it out, pytest-timeout would fail the test.
    with MockModelServer([Script("stuck", [Reply("never", delay=3600)])]) as mock:
        sock = socket.create_connection(("127.0.0.1", mock.port))
        body = json.dumps(claude_request("[script:stuck]")).encode()
        head = f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
        sock.sendall(head.encode() + body)
        while not mock.requests:  # until the server holds the request (pytest-timeout guards)
            time.sleep(0.01)
        port = mock.port
        mock.stop()
        sock.close()
        # stop() returned with the answer still an hour away, and the server is gone.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=30).close()


def test_stop_closes_idle_keep_alive_connections() -> None:
    """An idle keep-alive connection does not keep the server from stopping."""
    mock = MockModelServer().start()
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        conn.request("GET", "/v1/models")
        conn.getresponse().read()
        port = mock.port
        # The connection stays open until after stop(): a stop() that waited for it
        # would never return (pytest-timeout would fail the test).
        mock.stop()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port)).close()
    finally:
        conn.close()


def test_proxied_requests_are_refused_and_logged(mock: MockModelServer) -> None:
    """CONNECT and absolute-URI requests (the mock used as a proxy) get 403, kind ``proxy``."""
    with socket.create_connection(("127.0.0.1", mock.port), timeout=10) as sock:
        sock.sendall(b"CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 403")
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        conn.request("GET", "http://example.com/telemetry")
        response = conn.getresponse()
        assert response.status == 403
        response.read()
    finally:
        conn.close()
    assert [(r.kind, r.method, r.path) for r in mock.requests] == [
        ("proxy", "CONNECT", "example.com:443"),
        ("proxy", "GET", "http://example.com/telemetry"),
    ]
