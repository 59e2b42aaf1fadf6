"""The probable cause: one line naming the most significant deltas of a changed scenario.

For a ``regressed`` or ``improved`` scenario: up to two usage deltas with p-value
below alpha (most significant first), else the path divergence when the share of
trials following BASE's typical path differs (p below alpha), then effort deltas to
fill two places, and the check whose failures moved most in the verdict's
direction. It is an association seen in these trials, not proof of a cause: every
renderer labels it so.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..report.behaviour import CheckDelta, EffortDelta, PathDelta, UsageDelta
from ..stats import ComparisonVerdict
from .steps import step_label

__all__ = ["CAUSE_LABEL", "effort_summary", "probable_cause"]

#: How every renderer introduces the line.
CAUSE_LABEL = "probable cause (an association, not proof)"
_NAMED = 2
_WORSE = {
    "regressed": ("started-failing", "fails-more"),
    "improved": ("stopped-failing", "fails-less"),
}


def effort_summary(row: EffortDelta) -> str:
    """``turns 4.0 → 9.5 per trial``, ``cost $0.0100 → $0.0300 per trial``, ..."""

    def shown(value: float | None) -> str:
        if value is None:
            return "n/a"
        if row.metric == "cost":
            return f"${value:.4f}"
        if row.metric == "durationMs":
            return f"{value / 1000:.1f} s"
        return f"{value:,.0f}" if row.metric == "tokens" else f"{value:.1f}"

    name = "duration" if row.metric == "durationMs" else row.metric
    return f"{name} {shown(row.base_mean)} → {shown(row.head_mean)} per trial"


def _path_summary(paths: PathDelta) -> str | None:
    index = paths.first_divergence
    if index is None:
        return None
    row = paths.alignment[index]
    if row.base is not None and row.head is not None:
        what = f"{step_label(row.base)} → {step_label(row.head)}"
    elif row.base is not None:
        what = f"{step_label(row.base)} dropped"
    else:
        what = f"{step_label(row.head) if row.head is not None else '?'} added"
    return (
        f"typical path diverges at step {index + 1}: {what} "
        f"({paths.base_following}/{paths.base.trials} → "
        f"{paths.head_following}/{paths.head.trials} follow BASE's path)"
    )


def _check(checks: Sequence[CheckDelta], verdict: ComparisonVerdict) -> CheckDelta | None:
    moved = [c for c in checks if c.change in _WORSE.get(verdict, ())]
    if not moved:
        return None

    def shift(c: CheckDelta) -> float:
        return abs(c.head_failed / max(c.head_graded, 1) - c.base_failed / max(c.base_graded, 1))

    return min(moved, key=lambda c: (c.p_value, -shift(c), c.index))


def probable_cause(
    verdict: ComparisonVerdict | None,
    *,
    usage: Sequence[UsageDelta] | None,
    paths: PathDelta | None,
    effort: Sequence[EffortDelta],
    checks: Sequence[CheckDelta],
    alpha: float,
) -> str | None:
    """The line for a regressed or improved scenario (``None`` for any other verdict)."""
    if verdict not in ("regressed", "improved"):
        return None
    parts = [row.summary for row in usage or [] if row.p_value < alpha][:_NAMED]
    if not parts and paths is not None and paths.p_value < alpha:
        diverged = _path_summary(paths)
        parts += [diverged] if diverged else []
    if usage is not None and not parts:
        parts.append(f"no skill, subagent or tool use differs at p < {alpha:g}")
    elif usage is None:
        parts.append("transcripts absent: skills, subagents and tools not compared")
    tested = [row for row in effort if row.p_value is not None and row.p_value < alpha]
    for row in sorted(tested, key=lambda r: r.p_value or 0.0)[: max(0, _NAMED - len(parts))]:
        parts.append(effort_summary(row))
    check = _check(checks, verdict)
    if check is not None:
        parts.append(check.summary)
    return f"{verdict}: " + "; ".join(parts)
