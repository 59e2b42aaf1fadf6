"""A scripted mock model server that the real ``claude`` and ``opencode`` CLIs can talk to.

It listens on 127.0.0.1 on an ephemeral port and speaks both the Anthropic
Messages API (``POST /v1/messages``, what Claude Code calls) and OpenAI chat
completions (``POST /v1/chat/completions``, what OpenCode's openai-compatible
provider calls). Every answer comes from a :class:`~.script.Script` chosen by
the ``[script:NAME]`` marker in the prompt, at the step given by how many tool
results the request already carries, so concurrent conversations never share
state. Every request is logged as a :class:`RequestRecord`.

Use it as a context manager::

    with MockModelServer([Script("hello", [WriteFile("a.txt", "hi"), Reply("done")])]) as mock:
        ...  # point a CLI at mock.anthropic_base_url or mock.openai_base_url
        assert mock.requests[0].script == "hello"
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import parse_qs, urlsplit

from . import wire_anthropic, wire_openai
from .script import (
    DEFAULT_SCRIPT,
    Action,
    CallTool,
    Client,
    Fail,
    Reply,
    RunBash,
    Script,
    ToolCallSpec,
    Usage,
    WriteFile,
    client_for_tools,
    resolve_tool_call,
)
from .wire import Api, ParsedRequest, Response, json_response, new_id

__all__ = [
    "CallTool",
    "Fail",
    "MockModelServer",
    "Reply",
    "RequestKind",
    "RequestRecord",
    "RunBash",
    "Script",
    "Usage",
    "WriteFile",
]

RequestKind = Literal["main", "side", "count_tokens", "models", "proxy", "unknown"]
"""``main``: a scripted model call (tools offered); ``side``: a model call without tools
(OpenCode's title request); ``proxy``: a request meant for another host, which reached
the mock because a client used it as its HTTP(S) proxy (answered 403); ``unknown``: a
path the mock does not serve (answered 404)."""

SIDE_REPLY = "Mock title"
"""The default answer to model calls that offer no tools."""

SIDE_USAGE = Usage(input_tokens=7, output_tokens=3)
"""The default usage reported for those side calls."""

GATE_WAIT_S = 120.0
"""Longest a gated turn waits for its go file (a guard against a test that hangs)."""


@dataclass(frozen=True)
class RequestRecord:
    """One request the mock received, and how it answered."""

    method: str
    """HTTP method."""
    path: str
    """Path without the query string, e.g. ``/v1/messages``."""
    query: Mapping[str, list[str]]
    """Parsed query string, e.g. ``{"beta": ["true"]}``."""
    headers: Mapping[str, str]
    """Request headers, names lower-cased."""
    body: Any
    """The JSON body, or the raw text when it is not JSON, or None when empty."""
    kind: RequestKind
    """What the mock took the request for."""
    api: Api | None = None
    """The API dialect of a model call."""
    client: Client | None = None
    """Whose tool names were used (guessed from the tools offered)."""
    model: str | None = None
    """The requested model."""
    script: str | None = None
    """The script that answered a main call."""
    step: int | None = None
    """The script step (tool results already in the conversation)."""
    workdir: str | None = None
    """The working directory used to resolve relative paths."""
    user_texts: tuple[str, ...] = ()
    """Every user-authored text part of the conversation, in order (the prompt is one)."""
    action: str = ""
    """What was answered: ``text``, ``tool NAME``, ``error STATUS``."""
    status: int = 200
    """The HTTP status sent."""
    exhausted: bool = False
    """Whether the script had run out of turns."""
    error: str | None = None
    """A traceback when the mock itself failed (answered 500)."""

    @property
    def prompt(self) -> str:
        """All user-authored text of the conversation, joined with newlines."""
        return "\n".join(self.user_texts)


class MockModelServer:
    """A scripted model server on ``127.0.0.1``; start it with ``with`` or :meth:`start`."""

    def __init__(
        self,
        scripts: Iterable[Script] = (),
        *,
        side_reply: str = SIDE_REPLY,
        side_usage: Usage = SIDE_USAGE,
        model_ids: Iterable[str] = ("mock-model",),
    ) -> None:
        """Create a stopped server.

        Args:
            scripts: Initial scripts; more can be added with :meth:`add` at any time.
            side_reply: Text answered to model calls that offer no tools.
            side_usage: Usage reported for those calls.
            model_ids: Models listed by ``GET /v1/models``.
        """
        self._scripts: dict[str, Script] = {}
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._side = Reply(side_reply, usage=side_usage)
        self._model_ids = list(model_ids)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.add(*scripts)

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> Self:
        """Bind an ephemeral port on 127.0.0.1 and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("mock model server already started")
        self._stopping.clear()
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="mock-model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections, wait for handler threads, close the socket."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._stopping.set()
        httpd.shutdown()
        thread.join()
        httpd.cut_connections()
        httpd.server_close()
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (only while started)."""
        if self._httpd is None:
            raise RuntimeError("mock model server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the value for ``ANTHROPIC_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for Claude Code (``ANTHROPIC_BASE_URL``); the SDK appends ``/v1/...``."""
        return self.url

    @property
    def openai_base_url(self) -> str:
        """Base URL for an openai-compatible provider (``options.baseURL``), ending in ``/v1``."""
        return f"{self.url}/v1"

    # -- scripts and log -----------------------------------------------------------

    def add(self, *scripts: Script) -> None:
        """Register scripts by name, replacing any of the same name."""
        with self._lock:
            for script in scripts:
                self._scripts[script.name] = script

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._records)

    def requests_for(self, script: str) -> list[RequestRecord]:
        """The main model calls answered by ``script``."""
        return [r for r in self.requests if r.script == script]

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self._lock:
            self._records.clear()

    # -- request handling (called from handler threads) ----------------------------

    def handle(
        self, method: str, target: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[Response, float]:
        """Log one request and return the response and the delay to apply before sending it."""
        split = urlsplit(target)
        base = RequestRecord(
            method=method,
            # A proxied request names another host ("host:443", "http://host/..."): keep it whole.
            path=split.path if target.startswith("/") else target,
            query=parse_qs(split.query),
            headers=dict(headers),
            body=_decode(raw),
            kind="unknown",
        )
        try:
            response, record, delay = self._dispatch(base)
        except Exception:  # noqa: BLE001 - a mock bug must reach the test as a 500 + record
            error = traceback.format_exc()
            response = json_response(500, {"error": {"type": "mock_bug", "message": error}})
            record, delay = replace(base, status=500, error=error), 0.0
        with self._lock:
            self._records.append(record)
        return response, delay

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` has begun."""
        return self._stopping.is_set()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` unless the server is stopping."""
        self._stopping.wait(seconds)

    def _pass_gate(self, workdir: Path, gate: str) -> None:
        """Say the request arrived, then wait (at most :data:`GATE_WAIT_S`) for the go file."""
        (workdir / f"{gate}.arrived").touch()
        deadline = time.monotonic() + GATE_WAIT_S  # a hang guard, not a speed bound
        while not (workdir / f"{gate}.go").exists() and time.monotonic() < deadline:
            if self._stopping.wait(0.01):
                return

    def _dispatch(self, rec: RequestRecord) -> tuple[Response, RequestRecord, float]:
        if rec.method == "CONNECT" or not rec.path.startswith("/"):
            answer = {"error": {"type": "forbidden", "message": "mock: no traffic leaves"}}
            response = json_response(403, answer, {"connection": "close"})
            return response, replace(rec, kind="proxy", status=403), 0.0
        path, body, is_post = rec.path.rstrip("/"), rec.body, rec.method == "POST"
        if is_post and path == "/v1/messages" and isinstance(body, dict):
            return self._model_call(rec, wire_anthropic.parse(body))
        chat = path in ("/v1/chat/completions", "/chat/completions")
        if is_post and chat and isinstance(body, dict):
            return self._model_call(rec, wire_openai.parse(body))
        if is_post and path == "/v1/messages/count_tokens" and isinstance(body, dict):
            return wire_anthropic.count_tokens(body), replace(rec, kind="count_tokens"), 0.0
        if rec.method == "GET" and path in ("/v1/models", "/models"):
            anthropic = "anthropic-version" in rec.headers
            wire = wire_anthropic if anthropic else wire_openai
            return wire.models(self._model_ids), replace(rec, kind="models"), 0.0
        answer = {"error": {"type": "not_found_error", "message": f"mock: no route {path}"}}
        return json_response(404, answer), replace(rec, status=404), 0.0

    def _model_call(
        self, rec: RequestRecord, req: ParsedRequest
    ) -> tuple[Response, RequestRecord, float]:
        """Answer a model call from its script (or the side reply when it offers no tools)."""
        client = client_for_tools(
            req.tool_names, fallback="claude" if req.api == "anthropic" else "opencode"
        )
        rec = replace(
            rec, api=req.api, client=client, model=req.model, user_texts=req.user_texts, kind="main"
        )
        script: Script | None = None
        action: Action = self._side
        if not req.tool_names:
            rec = replace(rec, kind="side")
        else:
            name = req.script_name or DEFAULT_SCRIPT
            with self._lock:
                script = self._scripts.get(name)
            exhausted = False
            if script is None:
                action = Fail(400, f"mock: no script named {name!r}")
            else:
                action, exhausted = script.turn_at(req.tool_results)
            rec = replace(rec, script=name, step=req.tool_results, exhausted=exhausted)
        workdir = (script.workdir if script else None) or req.workdir
        rec = replace(rec, workdir=workdir)
        if action.gate is not None and workdir is not None:
            self._pass_gate(Path(workdir), action.gate)
        response, label = _answer(action, req, client=client, workdir=workdir)
        return response, replace(rec, action=label, status=response.status), action.delay


def _answer(
    action: Action, req: ParsedRequest, *, client: Client, workdir: str | None
) -> tuple[Response, str]:
    """Render ``action`` in the request's wire format; also return a label for the log."""
    anthropic = req.api == "anthropic"
    if isinstance(action, Fail):
        render_error = wire_anthropic.render_error if anthropic else wire_openai.render_error
        response = render_error(action.status, action.message, retry_after_ms=action.retry_after_ms)
        return response, f"error {action.status}"
    content: str | ToolCallSpec
    if isinstance(action, Reply):
        content, label = action.text, "text"
    else:
        content = resolve_tool_call(
            action, client=client, workdir=workdir, tool_params=req.tool_params
        )
        label = f"tool {content.name}"
    render = wire_anthropic.render if anthropic else wire_openai.render
    response = render(
        content,
        model=req.model or "mock-model",
        usage=action.usage,
        stream=req.stream,
        request_id=new_id("req"),
    )
    return response, label


def _decode(raw: bytes) -> Any:
    """Parse a request body as JSON, else return it as text (None when empty)."""
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


class _HTTPServer(ThreadingHTTPServer):
    """The socket side: one thread per connection, every connection tracked so stop() can cut it."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, mock: MockModelServer) -> None:
        self.mock = mock
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        # Headers and body are two writes: without this, Nagle holds the body back until
        # the client's delayed ACK of the headers (up to 40 ms per answer).
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._connections_lock:
            self._connections.add(conn)
        return conn, address

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        """Shut down every open connection so idle keep-alive handlers return."""
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore connection errors (clients hang up, stop() cuts them); report the rest."""
        if not self.mock.stopping:
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Read one HTTP request, let the mock answer it, write the response."""

    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    timeout = 120

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_CONNECT(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self, *, send_body: bool = True) -> None:
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        response, delay = self.server.mock.handle(self.command, self.path, headers, raw)
        if delay > 0:
            self.server.mock.sleep(delay)
        self.send_response(response.status)
        self.send_header("content-type", response.content_type)
        self.send_header("content-length", str(len(response.body)))
        if response.content_type == "text/event-stream":
            self.send_header("cache-control", "no-cache")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(response.body)
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the mock keeps its own request log."""
