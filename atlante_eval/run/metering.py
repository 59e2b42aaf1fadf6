"""What a run makes of its model gateway: each trial's route, figures and evidence.

With the gateway on (``eval.gateway``, ``--gateway``; docs/gateway.md) the run
opens one :func:`~atlante_eval.gateway.open_gateway` for its whole life
(:func:`run_gateway`) and each trial a :class:`TrialMeter`: its route, the ledger
of its transcript's tool calls and its ``model-calls.jsonl``. When the session
is over, :func:`settle` decides the trial's figures:

* the route was bound and every call on it was read: ``tokens``, ``cost`` and
  ``model`` are the gateway's (``usage.source: gateway``; the cost is the host's
  own figure when it gave one, else the price table's), the host's own total is
  kept beside them, and the tampering evidence is the cross-check's
  (:func:`~atlante_eval.gateway.crosscheck.cross_check`) plus a host total above
  the gateway's by more than :data:`MISMATCH_TOKENS` or :data:`MISMATCH_SHARE`;
* else the figures are the host's (``usage.source: host``) and ``usage.fallback``
  says why; when the host did report figures, the run warns once
  (``eval-gateway-fallback``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NotRequired, TypedDict

from .._util.logs import get_logger
from ..choices import GatewayMode
from ..diagnostics import Diagnostic, warning
from ..gateway import Gateway, RouteUsage, TrialRoute, open_gateway
from ..gateway.crosscheck import TranscriptLedger, cross_check
from ..gateway.records import ModelCallWriter
from ..hosts import SessionUsage
from ..report import (
    CostSource,
    GatewaySummary,
    TamperEvidence,
    TrialFiles,
    TrialResult,
    TrialUsage,
    model_version_of,
)
from ..transcript import Redactor

if TYPE_CHECKING:  # the isolation layer loads with the first trial it confines
    from ..isolation.trial import IsolationSettings

__all__ = [
    "MISMATCH_SHARE",
    "MISMATCH_TOKENS",
    "GatewayRun",
    "MeteredFields",
    "Settled",
    "TrialMeter",
    "gateway_notice",
    "run_gateway",
    "settle",
    "with_gateway",
]

log = get_logger("atlante_eval.run")

#: A host total this many tokens above the gateway's (and :data:`MISMATCH_SHARE`) is evidence.
MISMATCH_TOKENS = 256
#: ... and this share of the gateway's total.
MISMATCH_SHARE = 0.05
_FALLBACK_REASONS = 5


@dataclass
class GatewayRun:
    """The run's gateway and what its trials made of it."""

    gateway: Gateway
    fallback_trials: int = 0
    """Trials whose figures are the host's."""
    reported: int = 0
    """Those of them whose host did report figures (the run warns about these)."""
    reasons: dict[str, int] = field(default_factory=dict)
    """Why those fell back, with how many (the first few reasons)."""

    def fell_back(self, reason: str, *, reported: bool) -> None:
        """Count a trial whose figures are the host's (``reported``: it gave some)."""
        self.fallback_trials += 1
        if not reported:
            return
        self.reported += 1
        if reason in self.reasons or len(self.reasons) < _FALLBACK_REASONS:
            self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def summary(self, reused: Iterable[TrialResult] = ()) -> GatewaySummary:
        """``meta.gateway``, the trials ``--resume`` reused counted as when they ran."""
        recorded = [t.usage for t in reused if t.usage is not None]
        return GatewaySummary(
            calls=self.gateway.calls + sum(u.calls for u in recorded if u.source == "gateway"),
            refused=self.gateway.refused,
            fallback_trials=self.fallback_trials + sum(1 for u in recorded if u.source == "host"),
        )


@contextlib.asynccontextmanager
async def run_gateway(mode: GatewayMode) -> AsyncIterator[GatewayRun | None]:
    """The run's gateway for the block (``None`` when ``mode`` is ``off``)."""
    if mode == "off":
        yield None
        return
    async with open_gateway() as gateway:
        log.info("gateway.start", url=gateway.url)
        yield GatewayRun(gateway)


def with_gateway(
    settings: IsolationSettings | None, run: GatewayRun | None
) -> IsolationSettings | None:
    """``--isolation os`` settings under which a session may also reach the gateway.

    A confined session reaches it the way it reaches any loopback port it may: the
    in-sandbox forwarder and the trial's filtering proxy (docs/isolation.md).
    """
    if settings is None or run is None:
        return settings
    return replace(settings, endpoints=(*settings.endpoints, run.gateway.endpoint))


def gateway_notice(run: GatewayRun | None) -> Diagnostic | None:
    """The run's ``eval-gateway-fallback`` warning, when trials fell back to the host's figures."""
    if run is None or not run.reported:
        return None
    why = "; ".join(f"{reason} ({count})" for reason, count in run.reasons.items())
    trials = "1 trial's" if run.reported == 1 else f"{run.reported} trials'"
    return warning(
        "eval-gateway-fallback",
        f"{trials} tokens, cost and model are what the host reported, not what the gateway "
        f"metered: {why}",
        next='see docs/gateway.md ("Fallback") for what each host and sign-in mode routes; '
        "--gateway off silences this",
    )


class TrialMeter:
    """One trial's route, its transcript ledger and its model-call record."""

    def __init__(self, route: TrialRoute, writer: ModelCallWriter | None) -> None:
        self.route = route
        self.writer = writer
        self.ledger = TranscriptLedger()
        self.transcribed = False
        """Whether the trial's transcript is being written (else nothing is cross-checked)."""
        self.host_cancelled = False
        """Whether the host's own figures stopped the session (before the gateway governed)."""

    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        run: GatewayRun,
        *,
        max_tokens: int,
        files: TrialFiles | None,
        redact: Redactor,
    ) -> Iterator[TrialMeter]:
        """Open the trial's route (and its record, when the trial has a directory)."""
        writer = ModelCallWriter(files, redact=redact) if files is not None else None
        try:
            record = writer.write if writer is not None else None
            with run.gateway.route(max_tokens=max_tokens, record=record, redact=redact) as route:
                yield cls(route, writer)
        finally:
            if writer is not None:
                writer.close()

    @property
    def governs(self) -> bool:
        """Whether the gateway's count binds the budget: routed, read, and called."""
        usage = self.route.usage()
        return self.route.bound and usage.calls > 0 and usage.unreadable == 0

    def budget(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Let the gateway end the session via ``cancel``; return the host's budget callback.

        The host's own figures stop the session only while the gateway does not govern.
        """

        def from_host() -> None:
            if not self.governs:
                self.host_cancelled = True
                cancel()

        self.route.on_exceeded = cancel
        return from_host


class MeteredFields(TypedDict):
    """The report fields of a trial that the gateway adds (each only when present)."""

    usage: NotRequired[TrialUsage]
    model_calls: NotRequired[str]


@dataclass(frozen=True, slots=True)
class Settled:
    """A trial's figures once its session is over."""

    tokens: int | None
    cost: float | None
    model: str | None
    model_version: str | None
    exceeded: bool
    usage: TrialUsage | None = None
    model_calls: str | None = None
    tampered: tuple[TamperEvidence, ...] = ()

    def add_to(self, fields: MeteredFields) -> None:
        """Set the trial's ``usage`` and ``modelCalls`` fields (those present); its
        evidence goes with the stream's (``SessionUsage.tamper``)."""
        if self.usage is not None:
            fields["usage"] = self.usage
        if self.model_calls is not None:
            fields["model_calls"] = self.model_calls


def settle(
    meter: TrialMeter | None,
    host: SessionUsage,
    run: GatewayRun | None,
    *,
    completed: bool,
) -> Settled:
    """Decide a trial's tokens, cost, model and evidence (see the module docstring).

    Args:
        meter: the trial's meter (``None``: the gateway is off).
        host: what the host's own stream reported.
        run: the run's gateway, which counts the trials that fell back.
        completed: whether the session ended normally (no timeout, budget or error).
    """
    if meter is None:
        return Settled(host.tokens, host.cost, host.model, host.model_version, host.exceeded)
    metered = meter.route.usage()
    calls_path = meter.writer.relative_path if meter.writer and meter.writer.written else None
    reason = _fallback(meter.route, metered)
    if reason is not None:
        if run is not None:
            run.fell_back(reason, reported=host.tokens is not None or host.cost is not None)
        usage = TrialUsage(
            source="host",
            calls=metered.calls,
            cost_source="host" if host.cost is not None else None,
            refused=metered.refused or None,
            fallback=reason,
        )
        return Settled(
            host.tokens,
            host.cost,
            host.model,
            host.model_version,
            host.exceeded or metered.exceeded,
            usage=usage,
            model_calls=calls_path,
        )
    cost, cost_source = _cost(host, metered)
    model = metered.model or host.model
    findings = cross_check(meter.route, meter.ledger, completed=completed)
    found = [TamperEvidence(kind=f.kind, detail=f.detail) for f in findings if meter.transcribed]
    if completed and _above(host.tokens, metered.tokens):
        found.append(
            TamperEvidence(
                kind="usage-mismatch",
                detail=f"the host reported {host.tokens} tokens; the provider served "
                f"{metered.tokens}",
            )
        )
    return Settled(
        tokens=metered.tokens,
        cost=cost,
        model=model,
        model_version=model_version_of(model) if model else None,
        exceeded=metered.exceeded or meter.host_cancelled,
        usage=_gateway_usage(metered, host, cost_source),
        model_calls=calls_path,
        tampered=tuple(found),
    )


def _fallback(route: TrialRoute, metered: RouteUsage) -> str | None:
    """Why a trial's figures must be the host's (``None``: the gateway's are complete)."""
    if not route.bound:
        return route.declined or "the host does not use the gateway"
    if metered.calls == 0:
        return "the host made no model call through the gateway"
    if metered.unreadable:
        return "the gateway could not read the usage of the provider's answers"
    return None


def _cost(host: SessionUsage, metered: RouteUsage) -> tuple[float | None, CostSource | None]:
    if host.cost is not None:
        return host.cost, "host"
    if metered.table_cost is not None:
        return metered.table_cost, "price-table"
    return None, None


def _above(host_tokens: int | None, gateway_tokens: int) -> bool:
    """Whether the host claims more tokens than the provider served, beyond the tolerance."""
    if host_tokens is None:
        return False
    return host_tokens - gateway_tokens > max(MISMATCH_TOKENS, MISMATCH_SHARE * gateway_tokens)


def _gateway_usage(
    metered: RouteUsage, host: SessionUsage, cost_source: CostSource | None
) -> TrialUsage:
    return TrialUsage(
        source="gateway",
        calls=metered.calls,
        input_tokens=metered.input_tokens,
        output_tokens=metered.output_tokens,
        cache_read_tokens=metered.cache_read_tokens,
        cache_write_tokens=metered.cache_write_tokens,
        cost_source=cost_source,
        host_tokens=host.tokens,
        host_cost=host.cost,
        refused=metered.refused or None,
    )
