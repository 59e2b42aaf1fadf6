"""The gateway forwards a route's requests, swaps the credential, meters, refuses, and cuts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from realhost.mock_model import MockModelServer, Reply, Script, Usage, WriteFile

from atlante_eval.gateway import Gateway, TrialRoute, open_gateway
from atlante_eval.transcript.model_calls import ModelCall

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """asyncio, as the CLI runs (two tests also run on trio)."""
    return "asyncio"


KEY = "sk-ant-real-key-for-the-gateway-tests"
TOOLS = [{"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}}}]


def _anthropic(script: str, *, stream: bool = True) -> dict[str, Any]:
    return {
        "model": "mock-model",
        "max_tokens": 100,
        "stream": stream,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": f"go [script:{script}]"}],
    }


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    """A started gateway."""
    async with open_gateway() as started:
        yield started


@pytest.fixture
def mock() -> Any:
    """A started mock model server."""
    with MockModelServer() as server:
        yield server


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_request_reaches_the_provider_with_the_real_key_and_is_metered(
    gateway: Gateway, mock: MockModelServer
) -> None:
    """The host's stand-in token becomes the real key upstream; the answer is passed on whole."""
    mock.add(Script("w", [WriteFile("a.txt", "hi", usage=Usage(1000, 20, 5, 6))]))
    calls: list[ModelCall] = []
    with gateway.route(max_tokens=10**6, record=calls.append) as route:
        route.bind(mock.anthropic_base_url)
        token = route.stand_in(KEY)
        assert route.stand_in(KEY) == token
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{route.base_url}/v1/messages?beta=true",
                json=_anthropic("w"),
                headers={
                    "x-api-key": token,
                    "accept-encoding": "gzip, br, zstd",
                    "user-agent": "claude-cli/2.1.332",
                },
            )
        assert answer.status_code == 200
        assert answer.text.count("event: ") == 7  # the mock's seven SSE events, unchanged
    [record] = mock.requests
    assert record.headers["x-api-key"] == KEY
    assert record.headers["accept-encoding"] == "gzip"  # what the meter can decode
    assert record.query == {"beta": ["true"]}
    assert record.headers["user-agent"] == "claude-cli/2.1.332"
    usage = route.usage()
    assert (usage.calls, usage.tokens, usage.model) == (1, 1031, "mock-model")
    [call] = calls
    assert (call.api, call.path, call.status, call.streamed) == (
        "anthropic-messages",
        "/v1/messages",
        200,
        True,
    )
    assert [t.name for t in call.tool_calls] == ["Write"]
    assert [r.name for r in route.requested] == ["Write"]


async def test_requests_off_an_open_route_or_without_its_token_are_refused(
    gateway: Gateway, mock: MockModelServer
) -> None:
    """Unknown route 403, a missing token 401, an ended route 403: each counted, none forwarded."""
    mock.add(Script("r", [Reply("done")]))
    async with httpx.AsyncClient() as client:
        with gateway.route(max_tokens=100) as route:
            route.bind(mock.anthropic_base_url)
            token = route.stand_in(KEY)
            wrong = await client.post(
                f"{route.base_url}/v1/messages", json=_anthropic("r"), headers={"x-api-key": "x"}
            )
            guessed = await client.post(f"{gateway.url}/t/guessed/v1/messages", json={})
            bare = await client.get(f"{gateway.url}/v1/models")
        ended = await client.post(
            f"{route.base_url}/v1/messages", json=_anthropic("r"), headers={"x-api-key": token}
        )
    assert [r.status_code for r in (wrong, guessed, bare, ended)] == [401, 403, 403, 403]
    assert "trial's token" in wrong.json()["error"]["message"]
    assert route.refused == 1
    assert gateway.refused == 4
    assert mock.requests == []


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_answer_that_crosses_the_budget_never_reaches_the_host(
    gateway: Gateway, mock: MockModelServer
) -> None:
    """The gateway ends the call at the crossing, tells the engine once, refuses what follows."""
    mock.add(Script("big", [WriteFile("a.txt", "x", usage=Usage(900_000, 5))]))
    crossed: list[int] = []
    calls: list[ModelCall] = []
    with gateway.route(
        max_tokens=100_000, on_exceeded=lambda: crossed.append(1), record=calls.append
    ) as route:
        route.bind(mock.anthropic_base_url)
        token = route.stand_in(KEY)
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.HTTPError):  # dropped: not a byte of the answer arrives
                await client.post(
                    f"{route.base_url}/v1/messages",
                    json=_anthropic("big"),
                    headers={"x-api-key": token},
                )
            again = await client.post(
                f"{route.base_url}/v1/messages",
                json=_anthropic("big"),
                headers={"x-api-key": token},
            )
    assert crossed == [1]
    assert route.exceeded
    assert route.tokens >= 900_001
    assert again.status_code == 403
    assert len(mock.requests) == 1
    [call] = calls
    assert call.ended == "budget"


async def test_closing_a_route_ends_the_call_under_way(
    gateway: Gateway, mock: MockModelServer
) -> None:
    """A trial that ends (timeout, budget) ends its in-flight upstream call at once."""
    mock.add(Script("slow", [Reply("late", delay=60)]))
    calls: list[ModelCall] = []
    outcome: list[BaseException] = []

    async def request(route: TrialRoute, token: str) -> None:
        async with httpx.AsyncClient(timeout=120) as client:
            try:
                await client.post(
                    f"{route.base_url}/v1/messages",
                    json=_anthropic("slow"),
                    headers={"x-api-key": token},
                )
            except httpx.HTTPError as exc:
                outcome.append(exc)

    with anyio.fail_after(30):  # a hang guard: the mock would answer after 60 s
        async with anyio.create_task_group() as group:
            with gateway.route(max_tokens=10**6, record=calls.append) as route:
                route.bind(mock.anthropic_base_url)
                group.start_soon(request, route, route.stand_in(KEY))
                await _arrived(mock)
    assert len(outcome) == 1
    [call] = calls
    assert call.ended == "route-closed"


async def _arrived(mock: MockModelServer) -> None:
    """Return once the mock logged a request (it logs before its scripted delay)."""
    while not mock.requests:  # noqa: ASYNC110 - the mock runs in threads: nothing to await
        await anyio.sleep(0.01)


async def test_a_streaming_chat_request_is_made_to_report_its_usage(
    gateway: Gateway, mock: MockModelServer
) -> None:
    """Without stream_options.include_usage the gateway asks for it; else the body is as sent."""
    mock.add(Script("c", [Reply("done", usage=Usage(300, 7))]))
    body = {
        "model": "mock-model",
        "stream": True,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
        "messages": [{"role": "user", "content": "go [script:c]"}],
    }
    asked = {**body, "stream_options": {"include_usage": True}}
    with gateway.route(max_tokens=10**6) as route:
        route.bind(mock.openai_base_url)
        token = route.stand_in(KEY)
        async with httpx.AsyncClient() as client:
            for each in (body, asked):
                answer = await client.post(
                    f"{route.base_url}/chat/completions",
                    content=json.dumps(each).encode(),
                    headers={"authorization": f"Bearer {token}"},
                )
                assert answer.status_code == 200
    first, second = mock.requests
    assert first.body["stream_options"] == {"include_usage": True}
    assert second.body == asked
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert route.usage().tokens == 2 * 307


async def test_an_unreachable_provider_is_a_502_and_a_recorded_call(gateway: Gateway) -> None:
    """The host gets the gateway's own error; the call is recorded as ended upstream."""
    calls: list[ModelCall] = []
    with gateway.route(max_tokens=100, record=calls.append) as route:
        route.bind("http://127.0.0.1:9")
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{route.base_url}/v1/messages",
                json={},
                headers={"x-api-key": route.stand_in(KEY)},
            )
    assert answer.status_code == 502
    [call] = calls
    assert (call.status, call.ended, call.readable) == (None, "upstream", True)


def test_the_http_libraries_load_with_the_first_connection() -> None:
    """Opening the gateway binds a socket only: h11 and httpx wait for a connection."""
    code = textwrap.dedent(
        """
        import sys, anyio
        from atlante_eval.gateway import open_gateway

        async def main():
            async with open_gateway() as gateway:
                before = {"h11", "httpx"} & set(sys.modules)
                async with await anyio.connect_tcp("127.0.0.1", gateway.endpoint.port) as s:
                    await s.send(b"GET /t/x HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n")
                    reply = await s.receive(100)
                after = {"h11", "httpx"} & set(sys.modules)
                print(sorted(before), sorted(after), reply.split()[1].decode())

        anyio.run(main)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", "['h11',", "'httpx']", "403"]


async def test_a_refused_request_body_is_never_read(gateway: Gateway) -> None:
    """A request without the token announcing 1 GiB gets 401 at once; its body is not read."""
    with gateway.route(max_tokens=100) as route:
        route.bind("http://127.0.0.1:9")
        route.stand_in(KEY)
        target = route.base_url.removeprefix(gateway.url)
        async with await anyio.connect_tcp("127.0.0.1", gateway.endpoint.port) as client:
            head = (
                f"POST {target}/v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {2**30}\r\n\r\n"
            )
            await client.send(head.encode() + b"x" * 1024)
            reply = await _read_all(client)
    assert reply.startswith(b"HTTP/1.1 401")
    assert route.refused == 1


async def test_bodies_beyond_the_caps_are_refused(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One body above REQUEST_BYTES, or a route holding more than ROUTE_BYTES: 413."""
    from atlante_eval.gateway import exchange

    monkeypatch.setattr(exchange, "REQUEST_BYTES", 1000)
    with gateway.route(max_tokens=100) as route:
        route.bind("http://127.0.0.1:9")
        token = route.stand_in(KEY)
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{route.base_url}/v1/messages", content=b"x" * 5000, headers={"x-api-key": token}
            )
        assert answer.status_code == 413
        with route.holding(100) as take:
            assert take(60)
            with route.holding(100) as other:
                assert not other(60)  # the route already holds 60 of its 100
            assert take(40)
        with route.holding(100) as take:
            assert take(100)  # given back when each exchange ended


async def test_idle_and_surplus_connections_are_closed(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that sends no request head is closed; beyond the cap, at once."""
    from atlante_eval.gateway import exchange, server

    monkeypatch.setattr(exchange, "HEAD_TIMEOUT_S", 0.2)
    monkeypatch.setattr(server, "MAX_CONNECTIONS", 1)
    port = gateway.endpoint.port
    with anyio.fail_after(30):  # a hang guard
        async with await anyio.connect_tcp("127.0.0.1", port) as idle:
            await idle.send(b"GET /t/x HTTP/1.1\r\n")  # an unfinished head: the first connection
            while gateway._open < 1:  # noqa: ASYNC110 - the count is plain state, no event to await
                await anyio.sleep(0.01)
            async with await anyio.connect_tcp("127.0.0.1", port) as surplus:
                assert await _read_all(surplus) == b""  # closed at once: one connection served
            assert await _read_all(idle) == b""  # closed when its head did not come


async def _read_all(stream: anyio.abc.ByteStream) -> bytes:
    data = b""
    while True:
        try:
            data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return data
