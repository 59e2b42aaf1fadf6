"""The filtering proxy a confined tree reaches the network through.

An HTTP proxy on a Unix socket: ``CONNECT host:port`` opens a tunnel, an
absolute-form request (``GET http://host:port/path``) is relayed to its origin.
Only destinations on the allow list are dialled; every other one is answered
``403`` and recorded in :attr:`FilterProxy.denied`. Names are resolved here, by
the engine, never inside the sandbox (which has no resolver it could reach).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .._util.endpoints import Endpoint, EndpointError, parse_endpoint
from .._util.errors import describe_os_error, sole_error
from .._util.logs import get_logger

__all__ = ["DENIED_LIMIT", "FilterProxy", "ProxyError", "serve_proxy"]

log = get_logger("atlante_eval.isolation.proxy")

_MAX_HEAD = 16 * 1024
#: Most distinct refused destinations a proxy remembers (the rest are counted).
DENIED_LIMIT = 100
#: Longest refused destination kept.
_TARGET_CHARS = 300
_DIAL_TIMEOUT_S = 30.0
_CHUNK = 65536


class FilterProxy:
    """The allow list of one proxy and what it refused."""

    def __init__(self, allow: Iterable[Endpoint]) -> None:
        self.allow = frozenset(allow)
        self.denied: dict[str, int] = {}
        """Refused destinations (``host:port``) and how often each was asked for
        (at most :data:`DENIED_LIMIT` of them)."""
        self.denied_omitted = 0
        """Refusals of destinations beyond the first :data:`DENIED_LIMIT`."""

    def permits(self, endpoint: Endpoint) -> bool:
        """Whether ``endpoint`` is on the allow list (``localhost`` counts as 127.0.0.1)."""
        if endpoint in self.allow:
            return True
        if endpoint.host == "localhost":
            return Endpoint("127.0.0.1", endpoint.port) in self.allow
        return False

    def _deny(self, target: str) -> None:
        target = target[:_TARGET_CHARS]
        if target in self.denied or len(self.denied) < DENIED_LIMIT:
            self.denied[target] = self.denied.get(target, 0) + 1
        else:
            self.denied_omitted += 1

    async def handle(self, client: anyio.abc.ByteStream) -> None:
        """Serve one client connection; its failure never reaches the trial."""
        try:
            await self._serve(client)
        except Exception:
            log.debug("proxy.connection_failed", exc_info=True)

    async def _serve(self, client: anyio.abc.ByteStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            try:
                head = await reader.receive_until(b"\r\n\r\n", _MAX_HEAD)
            except (anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.EndOfStream):
                return
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            request_line, _, rest = head.partition(b"\r\n")
            words = request_line.decode("latin-1").split(" ")
            if len(words) != 3:
                await _reply(client, 400, "Bad Request")
                return
            method, target, version = words
            connect = method.upper() == "CONNECT"
            try:
                endpoint = parse_endpoint(target if connect else target.split("?", 1)[0])
            except EndpointError:
                await _reply(client, 400, "Bad Request")
                return
            if not connect and "://" not in target:
                await _reply(client, 400, "Bad Request")
                return
            if not self.permits(endpoint):
                self._deny(str(endpoint))
                await _reply(client, 403, "Forbidden by atlante-eval isolation")
                return
            try:
                with anyio.fail_after(_DIAL_TIMEOUT_S):
                    upstream = await anyio.connect_tcp(endpoint.host, endpoint.port)
            except (OSError, TimeoutError):
                await _reply(client, 502, "Bad Gateway")
                return
            async with upstream:
                if connect:
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    lines = [_origin_form(method, target, version)] + ([rest] if rest else [])
                    await upstream.send(b"\r\n".join(lines) + b"\r\n\r\n")
                pending = reader.buffer
                if pending:
                    await upstream.send(bytes(pending))
                async with anyio.create_task_group() as group:
                    group.start_soon(_relay, client, upstream)
                    group.start_soon(_relay, upstream, client)


def _origin_form(method: str, target: str, version: str) -> bytes:
    after_scheme = target.split("://", 1)[1]
    slash = after_scheme.find("/")
    path = after_scheme[slash:] if slash >= 0 else "/"
    return f"{method} {path} {version}".encode("latin-1")


async def _reply(client: anyio.abc.ByteStream, status: int, reason: str) -> None:
    body = f"{status} {reason}\n".encode()
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await client.send(
            f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )


async def _relay(source: anyio.abc.ByteStream, target: anyio.abc.ByteStream) -> None:
    try:
        while True:
            data = await source.receive(_CHUNK)
            await target.send(data)
    except (anyio.EndOfStream, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await target.send_eof()


class ProxyError(OSError):
    """Raised by :func:`serve_proxy` when the trial's proxy cannot listen or stops accepting.

    Its text names the cause (``Too many open files (EMFILE)``); the trial that
    needed the proxy becomes an ``infra-error`` with it.
    """


async def _accept(listener: anyio.abc.SocketListener, proxy: FilterProxy) -> None:
    """Accept connections until cancelled; an accept that fails ends the trial, said plainly."""
    try:
        await listener.serve(proxy.handle)
    except (OSError, anyio.BrokenResourceError, BaseExceptionGroup) as exc:
        # serve's own task group wraps the error; anyio's accept says BrokenResourceError
        # for the OSError (EMFILE, ENFILE, ENOMEM) it was raised from.
        cause = sole_error(exc)
        if isinstance(cause, anyio.BrokenResourceError) and isinstance(cause.__cause__, OSError):
            cause = cause.__cause__
        if not isinstance(cause, OSError):
            raise
        raise ProxyError(
            f"the trial's network proxy stopped accepting connections: {describe_os_error(cause)}"
        ) from cause


@contextlib.asynccontextmanager
async def serve_proxy(proxy: FilterProxy, socket_path: Path) -> AsyncIterator[FilterProxy]:
    """Serve ``proxy`` on a new Unix socket at ``socket_path`` until the block ends.

    Raises:
        ProxyError: the socket cannot be made, or accepting a connection failed.
    """
    try:
        listener = await anyio.create_unix_listener(socket_path)
        await anyio.Path(socket_path).chmod(0o600)
    except OSError as exc:
        raise ProxyError(
            f"the trial's network proxy could not listen: {describe_os_error(exc)}"
        ) from exc
    async with anyio.create_task_group() as group:
        group.start_soon(_accept, listener, proxy)
        try:
            yield proxy
        finally:
            group.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await listener.aclose()
