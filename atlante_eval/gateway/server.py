"""The run's model gateway: one HTTP listener on 127.0.0.1, a route per trial.

:func:`open_gateway` is the gateway's one lifecycle: it binds the listening
socket (cheap: no HTTP library is imported), serves connections for the block,
and on the way out stops accepting, ends every exchange and closes the upstream
connections, shielded from cancellation. The HTTP/1.1 framing (h11) and the
upstream client (httpx) load with the first connection (:mod:`.exchange`), so a
run's start, and the CLI's, never pay for them.

A request's path names its trial: ``/t/<route token>/<the provider path>``. A
request on no open route is refused (403) and counted in :attr:`Gateway.refused`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from .._util.endpoints import Endpoint
from .._util.logs import get_logger
from ..transcript import Redactor
from ..transcript.model_calls import ModelCall
from .routes import TrialRoute

if TYPE_CHECKING:
    from .exchange import Forwarder

__all__ = ["MAX_CONNECTIONS", "Gateway", "open_gateway"]

log = get_logger("atlante_eval.gateway")

_ROUTE_PREFIX = "/t/"
#: Most connections served at once; more are closed at once (an agent opening thousands
#: cannot take the engine's file descriptors).
MAX_CONNECTIONS = 512


class Gateway:
    """The run's gateway: its address, its open routes, what it refused."""

    def __init__(self, port: int) -> None:
        self.endpoint = Endpoint("127.0.0.1", port)
        """Where it listens (a confined session reaches it through the trial's proxy)."""
        self.url = f"http://127.0.0.1:{port}"
        self._routes: dict[str, TrialRoute] = {}
        self.refused = 0
        """Requests refused: on no open route, or without the route's token."""
        self.calls = 0
        """Model calls forwarded on routes that have closed."""
        self._forwarder: Forwarder | None = None
        self._closing = False
        self._open = 0

    @contextlib.contextmanager
    def route(
        self,
        *,
        max_tokens: int,
        on_exceeded: Callable[[], None] | None = None,
        record: Callable[[ModelCall], None] | None = None,
        redact: Redactor | None = None,
    ) -> Iterator[TrialRoute]:
        """Open a trial's route for the block; on the way out it refuses what comes next."""
        route = TrialRoute(
            self.url, max_tokens=max_tokens, on_exceeded=on_exceeded, record=record, redact=redact
        )
        self._routes[route.token] = route
        try:
            yield route
        finally:
            route.close()
            self._routes.pop(route.token, None)
            self.calls += route.usage().calls

    def find(self, target: str) -> tuple[TrialRoute | None, str]:
        """The open route a request target names, and the target below it."""
        if not target.startswith(_ROUTE_PREFIX):
            return None, target
        token, slash, rest = target[len(_ROUTE_PREFIX) :].partition("/")
        token, question, query = token.partition("?")
        route = self._routes.get(token)
        if route is None or route.closed:
            return None, target
        below = f"{slash}{rest}" if slash else "/"
        return route, below + (f"?{query}" if question else "")

    def refuse(self) -> None:
        """Count a refused request."""
        self.refused += 1

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        """Serve one connection; a failure ends only that connection."""
        async with stream:
            if self._closing or self._open >= MAX_CONNECTIONS:
                return
            self._open += 1
            try:
                forwarder = self._forwarder_now()
                await forwarder.serve(stream, find=self.find, refuse=self.refuse)
            except Exception:
                log.debug("gateway.connection_failed", exc_info=True)
            finally:
                self._open -= 1

    def _forwarder_now(self) -> Forwarder:
        if self._forwarder is None:
            from .exchange import Forwarder  # h11 and httpx: with the first connection only

            self._forwarder = Forwarder()
        return self._forwarder

    async def aclose(self) -> None:
        """End every route's exchanges and close the upstream connections."""
        self._closing = True
        for route in list(self._routes.values()):
            route.close()
        if self._forwarder is not None:
            await self._forwarder.aclose()


@contextlib.asynccontextmanager
async def open_gateway() -> AsyncIterator[Gateway]:
    """Listen on an ephemeral 127.0.0.1 port for the block (the run's gateway)."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
    gateway = Gateway(port)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, gateway.handle)
            try:
                yield gateway
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await gateway.aclose()
            await listener.aclose()
