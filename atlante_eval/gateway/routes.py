"""One trial's route through the gateway: where it goes, what it may carry, what it spent.

A :class:`TrialRoute` is opened by the engine for each trial and handed to the
host on its :class:`~atlante_eval.hosts.base.TrialContext` (the host sees it as a
:class:`~atlante_eval.hosts.base.ModelRoute`). The host points its CLI at
:attr:`TrialRoute.base_url`, tells the route the real provider URL
(:meth:`~TrialRoute.bind`) and swaps each real API key for a per-trial token
(:meth:`~TrialRoute.stand_in`); or it says why it cannot (:meth:`~TrialRoute.decline`).

The gateway then meters every call on the route into it: the running token count
that enforces ``maxTokens`` while an answer streams, the per-call records, and
the tool calls the model asked for, which the engine cross-checks against the
transcript. Everything it keeps is bounded.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import anyio

from ..report import utc_timestamp
from ..transcript import Redactor
from ..transcript.model_calls import ModelApi, ModelCall, ModelToolCall
from .metering import CallFigures
from .prices import price_of

__all__ = [
    "REQUESTED_LIMIT",
    "STAND_IN_PREFIX",
    "CallStart",
    "RequestedCall",
    "RouteUsage",
    "TrialRoute",
    "input_key",
]

#: Most model-requested tool calls a route remembers for the cross-check (the rest are counted).
REQUESTED_LIMIT = 10_000
#: How every per-trial stand-in credential starts (so the documentation can name it).
STAND_IN_PREFIX = "atlante-gw-"
#: Longest tool input (as JSON) a record line keeps.
_RECORD_INPUT_CHARS = 4 * 1024
#: Longest tool input (as JSON) compared by the cross-check (longer ones compare by name).
_KEY_CHARS = 4 * 1024
#: Stop reasons after which a host may drop a cut-off tool call (not cross-checked).
_CUT_OFF = frozenset({"max_tokens", "length", "model_context_window_exceeded"})


def input_key(value: object) -> str | None:
    """A tool input as canonical JSON for comparison, ``None`` when too long to compare."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None
    return text if len(text) <= _KEY_CHARS else None


def _capped_input(value: object) -> object:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return {"truncated": 0, "preview": repr(value)[:512]}
    if len(text) <= _RECORD_INPUT_CHARS:
        return value
    return {"truncated": len(text), "preview": text[:_RECORD_INPUT_CHARS]}


#: The tools that start a subagent: Claude Code's ``Task``/``Agent``, OpenCode's ``task``.
_SUBAGENT_TOOLS = frozenset({"Task", "Agent", "task"})


@dataclass(frozen=True, slots=True)
class RequestedCall:
    """A tool call the model asked for, as the cross-check compares it."""

    id: str | None
    name: str
    key: str | None
    """The input as canonical JSON (``None``: too long to compare)."""
    nested: bool
    """Asked for inside a subagent's conversation (see :meth:`TrialRoute.begin`): a host
    need not print those calls in its stream (OpenCode does not)."""
    subagent: bool
    """A subagent call (``Task``/``Agent``): the host may run it in the background, and then
    its completion adds a ``result`` event (Claude Code 2.1.332 backgrounds subagents the
    model did not ask to, ``is_backgrounded``)."""


@dataclass(frozen=True, slots=True)
class CallStart:
    """When and where a call began."""

    t: int
    at: str
    started: float
    api: ModelApi
    path: str
    nested: bool = False
    """The call continues a subagent's conversation."""


@dataclass(frozen=True, slots=True)
class RouteUsage:
    """What a route metered, once its trial's session is over."""

    calls: int
    tokens: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    model: str | None
    """The model that answered the most tokens."""
    table_cost: float | None
    """The calls priced with the price table (``None``: a model it does not know)."""
    unreadable: int
    """Calls whose usage the gateway could not read."""
    refused: int
    exceeded: bool


class TrialRoute:
    """One trial's route (see the module docstring)."""

    def __init__(
        self,
        gateway_url: str,
        *,
        max_tokens: int,
        on_exceeded: Callable[[], None] | None = None,
        record: Callable[[ModelCall], None] | None = None,
        redact: Redactor | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Open a route below ``gateway_url`` (``http://127.0.0.1:PORT``).

        Args:
            gateway_url: the gateway's own URL.
            max_tokens: the trial's token budget.
            on_exceeded: called once, as soon as the metered tokens exceed it.
            record: receives each finished call (the trial's ``model-calls.jsonl``).
            redact: learns each real credential the route substitutes (so the trial's
                files never store one).
            clock: seconds, monotonic.
        """
        self.token = secrets.token_urlsafe(24)
        self.base_url = f"{gateway_url}/t/{self.token}"
        """What the host's CLI calls instead of its provider."""
        self.max_tokens = max_tokens
        self.on_exceeded = on_exceeded
        self._record = record
        self._redact = redact
        self._clock = clock
        self._opened = clock()
        self.upstream: str | None = None
        """The real provider base URL (set by :meth:`bind`)."""
        self.declined: str | None = None
        """Why the host did not route this trial (set by :meth:`decline`)."""
        self._stand_ins: dict[str, str] = {}
        """Stand-in token -> real credential."""
        self.tokens = 0
        """Tokens metered so far, the answer streaming now included."""
        self.exceeded = False
        self.refused = 0
        self.closed = False
        self.requested: list[RequestedCall] = []
        """Tool calls the model asked for in answers the host received whole."""
        self.requested_omitted = 0
        self._subagent_prompts: list[str] = []
        """The prompts of the subagents the model started (at most :data:`REQUESTED_LIMIT`)."""
        self._calls = 0
        self._unreadable = 0
        self._parts = [0, 0, 0, 0]
        self._by_model: dict[str, int] = {}
        self._table_cost: float | None = 0.0
        self._scopes: set[anyio.CancelScope] = set()
        self._held = 0

    # -- what the host sees (hosts.base.ModelRoute) ---------------------------------------

    @property
    def bound(self) -> bool:
        """Whether the host pointed its CLI at this route."""
        return self.upstream is not None

    def bind(self, upstream: str) -> None:
        """Forward this route's requests to ``upstream`` (the provider's base URL)."""
        self.upstream = upstream.rstrip("/")
        self.declined = None

    def decline(self, reason: str) -> None:
        """Say why the host calls its provider directly (its figures will be the host's)."""
        if self.upstream is None:
            self.declined = reason

    def stand_in(self, credential: str) -> str:
        """Return the per-trial token the sandbox gets instead of ``credential``.

        The gateway puts ``credential`` back in each request's headers on this route
        only, and refuses a request that carries no stand-in of this route.
        """
        for token, real in self._stand_ins.items():
            if real == credential:
                return token
        token = f"{STAND_IN_PREFIX}{secrets.token_hex(24)}"
        self._stand_ins[token] = credential
        if self._redact is not None:
            self._redact.add([credential])
        return token

    @property
    def stand_ins(self) -> tuple[str, ...]:
        """The route's stand-in tokens."""
        return tuple(self._stand_ins)

    @property
    def credentials(self) -> tuple[str, ...]:
        """The real credentials the route puts back (never handed to the host)."""
        return tuple(self._stand_ins.values())

    # -- what the gateway calls ---------------------------------------------------------

    def admits(self, values: Iterable[str]) -> bool:
        """Whether a request whose header values are ``values`` carries this route's token.

        A route without stand-ins (a provider that needs no key) admits every request
        on it: its URL is the trial's secret.
        """
        if not self._stand_ins:
            return True
        return any(token in value for value in values for token in self._stand_ins)

    def substitute(self, value: str) -> str:
        """``value`` with every stand-in replaced by the real credential."""
        for token, real in self._stand_ins.items():
            if token in value:
                value = value.replace(token, real)
        return value

    def refuse(self) -> None:
        """Count a request refused on this route."""
        self.refused += 1

    def begin(self, api: ModelApi, path: str, *, opening: str | None = None) -> CallStart:
        """A model call begins; ``opening`` is its conversation's first user text.

        A conversation that opens with the prompt of a subagent the model started
        is that subagent's: the calls it asks for are ``nested``.
        """
        now = self._clock()
        nested = opening is not None and any(p in opening for p in self._subagent_prompts)
        return CallStart(
            t=int((now - self._opened) * 1000),
            at=utc_timestamp(),
            started=now,
            api=api,
            path=path,
            nested=nested,
        )

    def observe(self, added: int) -> None:
        """Count ``added`` more tokens; past the budget, tell the engine (once)."""
        if added <= 0:
            return
        self.tokens += added
        if self.tokens > self.max_tokens and not self.exceeded:
            self.exceeded = True
            if self.on_exceeded is not None:
                self.on_exceeded()

    @contextlib.contextmanager
    def holding(self, allowance: int = 64 * 1024 * 1024) -> Iterator[Callable[[int], bool]]:
        """Count the request bytes one exchange holds against the route's ``allowance``.

        Yields a function that takes ``n`` more bytes and says whether they fit; what
        the exchange took is given back when the block ends.
        """
        taken = 0

        def take(size: int) -> bool:
            nonlocal taken
            if self._held + size > allowance:
                return False
            self._held += size
            taken += size
            return True

        try:
            yield take
        finally:
            self._held -= taken

    @contextlib.contextmanager
    def exchange(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one forwarded request, cancelled when the route closes."""
        scope = anyio.CancelScope()
        if self.closed:
            scope.cancel()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    def end(
        self,
        start: CallStart,
        figures: CallFigures,
        *,
        status: int | None,
        streamed: bool,
        readable: bool,
        ended: str | None,
    ) -> ModelCall:
        """A call is over: add it to the route's figures and record it."""
        self._calls += 1
        if not readable:
            self._unreadable += 1
        parts = (
            figures.input_tokens,
            figures.output_tokens,
            figures.cache_read_tokens,
            figures.cache_write_tokens,
        )
        self._parts = [a + (b or 0) for a, b in zip(self._parts, parts, strict=True)]
        tokens = figures.tokens
        if figures.model and tokens:
            self._by_model[figures.model] = self._by_model.get(figures.model, 0) + tokens
        self._price(figures)
        delivered = ended is None and status is not None and status < 300
        if delivered and figures.stop_reason not in _CUT_OFF:
            self._remember(figures, nested=start.nested)
        call = ModelCall(
            t=start.t,
            at=start.at,
            api=start.api,
            path=start.path[:200],
            status=status,
            model=figures.model,
            streamed=streamed,
            input_tokens=figures.input_tokens,
            output_tokens=figures.output_tokens,
            cache_read_tokens=figures.cache_read_tokens,
            cache_write_tokens=figures.cache_write_tokens,
            tokens=tokens,
            duration_ms=max(0, int((self._clock() - start.started) * 1000)),
            stop_reason=figures.stop_reason,
            tool_calls=[
                ModelToolCall(id=t.id, name=t.name, input=_capped_input(t.value()))
                for t in figures.tools
            ],
            tool_calls_omitted=figures.tools_omitted or None,
            readable=readable,
            ended=ended,
        )
        if self._record is not None:
            self._record(call)
        return call

    def _price(self, figures: CallFigures) -> None:
        if figures.tokens is None or self._table_cost is None:
            return
        price = price_of(figures.model)
        if price is None:
            self._table_cost = None
            return
        self._table_cost += price.cost(
            input_tokens=figures.input_tokens or 0,
            output_tokens=figures.output_tokens or 0,
            cache_read=figures.cache_read_tokens or 0,
            cache_write=figures.cache_write_tokens or 0,
        )

    def _remember(self, figures: CallFigures, *, nested: bool) -> None:
        for tool in figures.tools:
            if len(self.requested) >= REQUESTED_LIMIT:
                self.requested_omitted += 1
                continue
            value = tool.value()
            subagent = tool.name in _SUBAGENT_TOOLS
            prompt = value.get("prompt") if subagent and isinstance(value, dict) else None
            if isinstance(prompt, str) and prompt.strip():
                self._subagent_prompts.append(prompt.strip())
            self.requested.append(
                RequestedCall(
                    id=tool.id,
                    name=tool.name,
                    key=input_key(value),
                    nested=nested,
                    subagent=subagent,
                )
            )
        self.requested_omitted += figures.tools_omitted

    def close(self) -> None:
        """End the route: refuse what comes next, end what is under way."""
        self.closed = True
        for scope in list(self._scopes):
            scope.cancel()

    def usage(self) -> RouteUsage:
        """What the route metered."""
        model = max(self._by_model, key=lambda m: self._by_model[m], default=None)
        return RouteUsage(
            calls=self._calls,
            tokens=self.tokens,
            input_tokens=self._parts[0],
            output_tokens=self._parts[1],
            cache_read_tokens=self._parts[2],
            cache_write_tokens=self._parts[3],
            model=model,
            table_cost=self._table_cost if self._calls else None,
            unreadable=self._unreadable,
            refused=self.refused,
            exceeded=self.exceeded,
        )
