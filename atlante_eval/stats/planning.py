"""Plan trial counts: how many graded trials per side would likely reach a decision.

``compare`` reports it for an inconclusive comparison (``trialsNeeded``), and an
adaptive run reports the fixed-count run that would have reached its decisions
(:func:`fixed_trials`). See docs/statistics.md.
"""

from __future__ import annotations

from collections.abc import Callable

from ..choices import DEFAULT_ALPHA, DEFAULT_MARGIN
from .proportions import (
    ProportionComparison,
    compare_proportions,
    newcombe_difference_interval,
    trials_needed,
)

__all__ = ["PLANNING_POWER", "fixed_trials", "planned_trials"]

#: Power assumed when estimating the trials an inconclusive comparison needs.
PLANNING_POWER = 0.8
_SEARCH_CAP = 1_000_000


def fixed_trials(
    base_passed: int,
    base_graded: int,
    passed: int,
    graded: int,
    *,
    change: bool,
    alpha: float = DEFAULT_ALPHA,
    margin: float = DEFAULT_MARGIN,
    family: int = 1,
) -> int | None:
    """Graded trials per side a fixed-count run needs to reach a decision at these rates.

    The planning of ``trialsNeeded`` for a change (``change``: improved or regressed,
    at ``alpha / family``) or for ruling one out (unchanged, at ``alpha``), floored at
    the smallest count from 1 at which the observed rates meet the interval part of
    the rule. An adaptive run reports it as the fixed-count run that would reach the
    same decisions. None when a side has no graded trial, or past the search cap.
    """
    if not base_graded or not graded:
        return None
    comparison = compare_proportions(base_passed, base_graded, passed, graded)
    return planned_trials(
        comparison,
        alpha=alpha,
        change_alpha=alpha / family if family > 1 else alpha,
        margin=margin,
        change=change,
        start=1,
    )


def planned_trials(
    comparison: ProportionComparison,
    *,
    alpha: float,
    change_alpha: float,
    margin: float,
    change: bool,
    start: int,
) -> int | None:
    """Graded trials per side to confirm a change (``change``) or to rule one out.

    Fleiss's formula at :data:`PLANNING_POWER` (at ``change_alpha`` for a change,
    at ``alpha`` around the mean rate for ruling out a change of ``margin``), floored
    at the smallest count from ``start`` at which the observed rates would meet the
    interval part of the decision rule. None when a change has no difference to
    confirm, or past the search cap.
    """
    p1, p2 = comparison.rate1, comparison.rate2
    if change and p1 == p2:
        return None
    if change:
        planned = trials_needed(p1, p2, alpha=change_alpha, power=PLANNING_POWER)
    else:
        centre = (p1 + p2) / 2
        other = centre - margin if centre - margin >= 0.0 else centre + margin
        planned = trials_needed(centre, min(1.0, other), alpha=alpha, power=PLANNING_POWER)

    def decides(n: int) -> bool:
        low, high = newcombe_difference_interval(
            round(p1 * n), n, round(p2 * n), n, confidence=1 - (change_alpha if change else alpha)
        )
        return (low > 0.0 or high < 0.0) if change else (-margin < low and high < margin)

    floor = _smallest(decides, start=start)
    return max(planned or 0, floor) if floor is not None else planned


def _smallest(decides: Callable[[int], bool], *, start: int) -> int | None:
    """Smallest n >= start with ``decides(n)`` by doubling then bisection; None past the cap."""
    high = start
    while not decides(high):
        if high >= _SEARCH_CAP:
            return None
        high = min(high * 2, _SEARCH_CAP)
    low = max(start, high // 2)
    if decides(low):
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if decides(middle):
            high = middle
        else:
            low = middle
    return high
