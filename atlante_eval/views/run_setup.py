"""What a run ran on, in the same words everywhere: host and version, model, isolation, gateway.

The run summary, ``show RUN`` and the run page print these facts from the
report's ``meta``, in this order. Each fact is one function of ``meta`` in
:data:`SETUP_FACTS` (``None``: nothing to say); a new kind of setup is one more
function there and appears in all three (the model gateway's state is one: ``meta.gateway``).
Values are as recorded (untrusted): renderers escape them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..report import Meta, model_version_of

__all__ = ["SETUP_FACTS", "SetupFact", "isolation_of", "setup_facts", "setup_line"]


@dataclass(frozen=True, slots=True)
class SetupFact:
    """One fact about what a run ran on: ``isolation`` ``os``."""

    label: str
    """What it is (``host``, ``model``, ``isolation``, ``gateway``, ``limits``)."""
    value: str
    """Its value, as recorded."""


def isolation_of(meta: Meta) -> str:
    """``os`` or ``none``: a report without ``meta.isolation`` ran without OS isolation."""
    return meta.isolation or "none"


def _host(meta: Meta) -> SetupFact:
    version = meta.host_version or "version unknown"
    return SetupFact("host", f"{meta.host} {version}")


def _model(meta: Meta) -> SetupFact:
    same = meta.model_version in ("unknown", "none", meta.model, model_version_of(meta.model))
    return SetupFact("model", meta.model if same else f"{meta.model} ({meta.model_version})")


def _isolation(meta: Meta) -> SetupFact:
    return SetupFact("isolation", isolation_of(meta))


def _limits(meta: Meta) -> SetupFact | None:
    limits = meta.limits
    if limits is None:
        return None
    parts = [
        f"{name} {value:g}"
        for name, value in (
            ("memoryMb", limits.memory_mb),
            ("pids", limits.pids),
            ("cpus", limits.cpus),
            ("tmpMb", limits.tmp_mb),
        )
        if value is not None
    ]
    return SetupFact("limits", ", ".join(parts)) if parts else None


def _gateway(meta: Meta) -> SetupFact:
    """``on (12 model calls)`` with the model gateway's figures, or ``off`` (``meta.gateway``)."""
    gateway = meta.gateway
    if gateway is None:
        return SetupFact("gateway", "off")
    figures = [f"{gateway.calls} model call{'s' if gateway.calls != 1 else ''}"]
    if gateway.refused:
        figures.append(f"{gateway.refused} refused")
    if gateway.fallback_trials:
        trials = f"{gateway.fallback_trials} trial{'s' if gateway.fallback_trials != 1 else ''}"
        figures.append(f"{trials} on the host's figures")
    return SetupFact("gateway", f"on ({', '.join(figures)})")


#: The facts, in the order they are shown.
SETUP_FACTS: tuple[Callable[[Meta], SetupFact | None], ...] = (
    _host,
    _model,
    _isolation,
    _gateway,
    _limits,
)


def setup_facts(meta: Meta) -> list[SetupFact]:
    """Every fact :data:`SETUP_FACTS` has to say about ``meta``."""
    return [fact for make in SETUP_FACTS if (fact := make(meta)) is not None]


def setup_line(meta: Meta) -> str:
    """``host claude-code 2.1.332 · model anthropic/x · isolation os``: unescaped."""
    return " · ".join(f"{fact.label} {fact.value}" for fact in setup_facts(meta))
