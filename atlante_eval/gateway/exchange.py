"""Forward one connection's requests to the provider and meter the answers (h11 + httpx).

Loaded with the gateway's first connection. Each request on a trial's route is
checked (the route is open, the request carries the route's stand-in token, the
budget is not spent), its stand-in tokens are replaced by the real credentials,
and it is sent to the route's upstream with httpx (TLS, the user's proxy
variables, connection reuse). The answer streams back chunk by chunk as it came
off the wire; each chunk is metered *before* it is passed on, so the chunk that
crosses ``maxTokens`` never reaches the host: the gateway ends the upstream call,
drops the host's connection, and the route tells the engine to stop the session.

What the gateway changes in a request, and nothing else: the stand-in tokens (in
every header and the query), ``Accept-Encoding`` (narrowed to ``gzip``/``deflate``,
which the meter can decode), hop-by-hop headers, and, for a streaming Chat
Completions request that does not ask for its usage, ``stream_options.include_usage``
(without it the provider reports none). Docs: docs/gateway.md.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio
import anyio.abc
import h11
import httpx

from .._util.logs import get_logger
from ..transcript.model_calls import ModelApi
from .metering import CallMeter, api_of
from .routes import TrialRoute

__all__ = ["HEAD_TIMEOUT_S", "REQUEST_BYTES", "ROUTE_BYTES", "Forwarder"]

log = get_logger("atlante_eval.gateway")

#: Largest request body the gateway forwards (413 beyond).
REQUEST_BYTES = 32 * 1024 * 1024
#: Most request bytes one route holds at once, over its concurrent requests (413 beyond).
ROUTE_BYTES = 64 * 1024 * 1024
#: Longest wait for a request's head on an open connection (then it is closed).
HEAD_TIMEOUT_S = 120.0
_HEAD_BYTES = 64 * 1024
_CHUNK = 65536
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_DECODABLE = ("gzip", "deflate", "identity")
#: Requests that are no model call: forwarded, neither metered nor recorded.
_NOT_CALLS = ("/count_tokens", "/models")
_UPSTREAM_TIMEOUT = httpx.Timeout(connect=30.0, read=600.0, write=60.0, pool=60.0)

Find = Callable[[str], tuple[TrialRoute | None, str]]


class _Closed(Exception):
    """The client hung up, or the connection cannot carry another request."""


class _TooLarge(Exception):
    """A request body beyond what the gateway holds."""


@dataclass
class _Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes = b""


@dataclass
class _Outcome:
    status: int | None = None
    ended: str | None = None
    streamed: bool = False
    meter: CallMeter | None = None
    counted: int = 0
    keep_open: bool = True
    extra: dict[str, str] = field(default_factory=dict)


class Forwarder:
    """The gateway's HTTP side: one upstream client for the run, h11 per connection."""

    def __init__(self) -> None:
        self._clients: dict[bool, httpx.AsyncClient] = {}

    def client(self, url: str) -> httpx.AsyncClient:
        """The upstream client for ``url``'s scheme (the TLS one verifies, and loads the CAs
        only when a provider needs it)."""
        tls = url.startswith("https:")
        client = self._clients.get(tls)
        if client is None:
            client = httpx.AsyncClient(
                timeout=_UPSTREAM_TIMEOUT,
                follow_redirects=False,
                verify=tls,  # plain HTTP has nothing to verify: no CA bundle to load
                trust_env=True,  # the user's HTTPS_PROXY and SSL_CERT_FILE apply upstream
                limits=httpx.Limits(max_keepalive_connections=32, max_connections=None),
            )
            self._clients[tls] = client
        return client

    async def aclose(self) -> None:
        """Close the upstream connections."""
        for client in self._clients.values():
            await client.aclose()

    async def serve(
        self, stream: anyio.abc.ByteStream, *, find: Find, refuse: Callable[[], None]
    ) -> None:
        """Serve the connection's requests until it closes.

        Each request's head must arrive within :data:`HEAD_TIMEOUT_S`; its route and
        token are checked before its body is read (a refused request's body never is,
        and its connection closes), and the bodies a route holds at once are bounded
        (:data:`ROUTE_BYTES`).
        """
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_HEAD_BYTES)
        while True:
            try:
                with anyio.fail_after(HEAD_TIMEOUT_S):
                    request = await _receive_head(conn, stream)
            except (_Closed, h11.RemoteProtocolError, TimeoutError):
                return
            if request is None:
                return
            route, below = find(request.target)
            refusal = _refusal(route, request, refuse)
            if refusal is not None or route is None:
                status, why = refusal or (403, "no open trial route at this address")
                await _reply(conn, stream, status, why)
                return  # its body is not read: the connection cannot carry another request
            with route.holding(ROUTE_BYTES) as held:
                try:
                    request.body = await _receive_body(conn, stream, held)
                except (_Closed, h11.RemoteProtocolError):
                    return
                except _TooLarge:
                    await _reply(conn, stream, 413, "the request is larger than the gateway takes")
                    return
                keep_open = await self._forward(conn, stream, route, request, below)
            if not keep_open or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _forward(
        self,
        conn: h11.Connection,
        stream: anyio.abc.ByteStream,
        route: TrialRoute,
        request: _Request,
        below: str,
    ) -> bool:
        path = below.split("?", 1)[0]
        api = api_of(path)
        is_call = request.method == "POST" and not path.rstrip("/").endswith(_NOT_CALLS)
        body = _with_usage(request.body) if api == "openai-chat" and is_call else request.body
        outgoing = self._build(route, request, below, body)
        start = route.begin(api, path, opening=opening_text(request.body)) if is_call else None
        outcome = _Outcome()
        with route.exchange() as scope:
            try:
                await self._relay(conn, stream, route, outgoing, api, outcome)
            except httpx.HTTPError as exc:
                outcome.ended = "upstream"
                outcome.keep_open = await _reply_if_fresh(
                    conn, stream, 502, f"the provider could not be reached: {type(exc).__name__}"
                )
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, _Closed):
                outcome.ended, outcome.keep_open = "closed", False
        if scope.cancelled_caught:
            outcome.ended, outcome.keep_open = outcome.ended or "route-closed", False
        if start is not None:
            figures = outcome.meter.figures if outcome.meter is not None else None
            route.end(
                start,
                figures if figures is not None else CallMeter(api, streamed=False).figures,
                status=outcome.status,
                streamed=outcome.streamed,
                readable=_readable(api, outcome),
                ended=outcome.ended,
            )
        return outcome.keep_open

    def _build(
        self, route: TrialRoute, request: _Request, below: str, body: bytes
    ) -> httpx.Request:
        assert route.upstream is not None
        sent = {name.lower() for name, _value in request.headers}
        headers = [
            (name, route.substitute(value))
            for name, value in request.headers
            if name.lower() not in _HOP and name.lower() != "accept-encoding"
        ]
        headers.append(("accept-encoding", _encodings(request.headers)))
        url = route.upstream + route.substitute(below)
        outgoing = self.client(url).build_request(
            request.method, url, headers=headers, content=body
        )
        for default in ("user-agent", "accept"):  # httpx's defaults: the host did not send them
            if default not in sent and default in outgoing.headers:
                del outgoing.headers[default]
        return outgoing

    async def _relay(
        self,
        conn: h11.Connection,
        stream: anyio.abc.ByteStream,
        route: TrialRoute,
        outgoing: httpx.Request,
        api: ModelApi,
        outcome: _Outcome,
    ) -> None:
        response = await self.client(str(outgoing.url)).send(outgoing, stream=True)
        try:
            outcome.status = response.status_code
            content_type = response.headers.get("content-type", "")
            outcome.streamed = "text/event-stream" in content_type
            meter = CallMeter(
                api,
                streamed=outcome.streamed,
                encoding=response.headers.get("content-encoding"),
            )
            outcome.meter = meter
            head = [
                (name, value)
                for name, value in response.headers.items()
                if name.lower() not in _HOP
            ]
            if "content-length" in response.headers and "transfer-encoding" not in response.headers:
                head.append(("content-length", response.headers["content-length"]))
            # The head goes out with the first chunk (one write, not two): an answer whose
            # first chunk crosses the budget reaches the host not even in part.
            pending = conn.send(h11.Response(status_code=response.status_code, headers=head))
            chunks = response.aiter_raw(_CHUNK)
            try:
                async for chunk in chunks:
                    meter.feed(chunk)
                    outcome.counted = _observe(route, meter, outcome.counted)
                    if route.exceeded:
                        outcome.ended, outcome.keep_open = "budget", False
                        return
                    await stream.send((pending or b"") + (conn.send(h11.Data(data=chunk)) or b""))
                    pending = b""
            finally:
                await _close(chunks)
            meter.end()
            outcome.counted = _observe(route, meter, outcome.counted)
            if route.exceeded:
                outcome.ended, outcome.keep_open = "budget", False
                return
            tail = (pending or b"") + (conn.send(h11.EndOfMessage()) or b"")
            if tail:
                await stream.send(tail)
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()


async def _close(chunks: AsyncIterator[bytes]) -> None:
    """Close an answer's chunk iterator at once (an async generator left open warns)."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


def _readable(api: ModelApi, outcome: _Outcome) -> bool:
    """Whether the gateway read the usage a call reported (an error answer reports none)."""
    if outcome.status is None or outcome.status >= 300:
        return True
    meter = outcome.meter
    if api == "unknown" or meter is None or meter.unreadable:
        return False
    return outcome.ended is not None or meter.figures.tokens is not None


def _observe(route: TrialRoute, meter: CallMeter, counted: int) -> int:
    """Tell the route about the tokens the answer reported since last time."""
    now = meter.figures.tokens or 0
    if now > counted:
        route.observe(now - counted)
        return now
    return counted


def _encodings(headers: list[tuple[str, str]]) -> str:
    """The host's ``Accept-Encoding``, narrowed to what the meter decodes."""
    asked = [v for n, v in headers if n.lower() == "accept-encoding"]
    if not asked:
        return "identity"
    names = [part.split(";")[0].strip().lower() for part in ",".join(asked).split(",")]
    kept = [name for name in names if name in _DECODABLE]
    return ", ".join(kept) if kept else "identity"


def _with_usage(body: bytes) -> bytes:
    """A streaming Chat Completions body that asks for its usage (unchanged when it does)."""
    if b"include_usage" in body or b'"stream"' not in body:
        return body
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not isinstance(data, dict) or data.get("stream") is not True:
        return body
    options = data.get("stream_options")
    data["stream_options"] = {
        **(options if isinstance(options, dict) else {}),
        "include_usage": True,
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _refusal(
    route: TrialRoute | None, request: _Request, refuse: Callable[[], None]
) -> tuple[int, str] | None:
    """Why a request is refused before its body is read (counted), or ``None``."""
    if route is None:
        refuse()
        return 403, "no open trial route at this address"
    if not route.admits(value for _name, value in request.headers):
        route.refuse()
        refuse()
        return 401, "the request does not carry the trial's token"
    if route.upstream is None:
        return 403, "the trial's host did not bind this route"
    if route.exceeded:
        return 403, "the trial's token budget is spent"
    return None


async def _next_event(conn: h11.Connection, stream: anyio.abc.ByteStream) -> object:
    """The connection's next h11 event, reading from the client as needed."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            data = await stream.receive(_CHUNK)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            data = b""
        conn.receive_data(data)


#: Most characters of a conversation's opening text kept to recognise a subagent's.
_OPENING_CHARS = 64 * 1024


def _texts(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (p.get("text") for p in content if isinstance(p, dict))
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def opening_text(body: bytes) -> str | None:
    """A model call's first user text (Anthropic Messages, OpenAI Chat or Responses), capped.

    ``None`` when the body is no JSON object or opens with no user text.
    """
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(value, dict):
        return None
    messages = value.get("messages", value.get("input"))
    if isinstance(messages, str):
        return messages[:_OPENING_CHARS]
    if not isinstance(messages, list):
        return None
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return _texts(message.get("content"))[:_OPENING_CHARS] or None
    return None


async def _receive_head(conn: h11.Connection, stream: anyio.abc.ByteStream) -> _Request | None:
    """The next request's head (``None``: the client closed the connection)."""
    event = await _next_event(conn, stream)
    if not isinstance(event, h11.Request):
        return None
    return _Request(
        method=event.method.decode("ascii", "replace").upper(),
        target=event.target.decode("latin-1"),
        headers=[(n.decode("latin-1"), v.decode("latin-1")) for n, v in event.headers],
    )


async def _receive_body(
    conn: h11.Connection, stream: anyio.abc.ByteStream, held: Callable[[int], bool]
) -> bytes:
    """The request's body; ``held`` takes each piece's size from the route's allowance.

    Raises:
        _TooLarge: beyond :data:`REQUEST_BYTES`, or the route's allowance.
        _Closed: the client went away mid-body.
    """
    body = bytearray()
    while True:
        event = await _next_event(conn, stream)
        if isinstance(event, h11.Data):
            if len(body) + len(event.data) > REQUEST_BYTES or not held(len(event.data)):
                raise _TooLarge
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return bytes(body)
        else:
            raise _Closed


async def _send(conn: h11.Connection, stream: anyio.abc.ByteStream, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        await stream.send(data)


async def _reply(conn: h11.Connection, stream: anyio.abc.ByteStream, status: int, why: str) -> bool:
    """Answer with the gateway's own error; return whether the connection stays usable."""
    message = f"atlante-eval gateway: {why}"
    body = json.dumps({"type": "error", "error": {"type": "gateway_error", "message": message}})
    data = body.encode("utf-8")
    headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
    try:
        await _send(conn, stream, h11.Response(status_code=status, headers=headers))
        await _send(conn, stream, h11.Data(data=data))
        await _send(conn, stream, h11.EndOfMessage())
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, h11.LocalProtocolError):
        return False
    return True


async def _reply_if_fresh(
    conn: h11.Connection, stream: anyio.abc.ByteStream, status: int, why: str
) -> bool:
    """:func:`_reply` unless a response was already started (then the connection must go)."""
    if conn.our_state is not h11.SEND_RESPONSE:
        return False
    return await _reply(conn, stream, status, why)
