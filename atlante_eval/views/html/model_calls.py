"""A trial's model-call record and usage source, ready for its panel (docs/gateway.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ...report import TrialUsage
from ...transcript.model_calls import ModelCall

__all__ = ["PAGE_CALLS", "CallRow", "call_rows", "usage_note"]

#: Most model calls of one trial in the page (the record file has them all).
PAGE_CALLS = 100
_NAME_CHARS = 80


@dataclass(frozen=True, slots=True)
class CallRow:
    """One model call, ready for the page (text is escaped by the template)."""

    t: int
    model: str
    tokens: int | None
    duration_ms: int
    stop: str
    tools: str


def call_rows(calls: list[ModelCall]) -> tuple[list[CallRow], int]:
    """The first :data:`PAGE_CALLS` of ``calls`` as rows, and how many more there are."""
    rows = [
        CallRow(
            t=c.t,
            model=(c.model or "unknown")[:_NAME_CHARS],
            tokens=c.tokens,
            duration_ms=c.duration_ms,
            stop=(c.stop_reason or (f"ended: {c.ended}" if c.ended else ""))[:_NAME_CHARS],
            tools=", ".join(t.name[:_NAME_CHARS] for t in c.tool_calls),
        )
        for c in calls[:PAGE_CALLS]
    ]
    return rows, max(len(calls) - PAGE_CALLS, 0)


def usage_note(usage: TrialUsage | None) -> str | None:
    """Where a trial's figures come from, in words (``None``: the gateway was off)."""
    if usage is None:
        return None
    if usage.source == "gateway":
        host = f"; the host reported {usage.host_tokens:,}" if usage.host_tokens is not None else ""
        return f"metered by the gateway from {usage.calls} model calls{host}"
    return f"reported by the host: {usage.fallback or 'no reason given'}"
