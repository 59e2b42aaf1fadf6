"""Plan trial counts at the real target power: the power of ``compare``'s one-look rule.

``compare`` reports it for an inconclusive comparison (``trialsNeeded``,
:func:`planned_trials`), and an adaptive run reports the fixed-count run that would
have reached its decisions (:func:`fixed_trials`). See docs/statistics.md.

Fleiss's normal-approximation formula (:func:`.proportions.trials_needed`) promises
80% power but delivers 72-75% for ``compare``'s rule (Fisher's test and the Newcombe
interval), and about 59% for ``unchanged``. Here the power is computed from the
rule itself: for every BASE count, the HEAD counts on which ``compare`` decides
are found (the Fisher p-value in floating point, as likely tables summed with R's
tolerance) and their binomial chance summed; the trial count is then searched for
that power. The same sums answer "what can these trial counts detect at all":
:func:`detectable_drop`.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from ..choices import DEFAULT_ALPHA, DEFAULT_MARGIN
from .exact import binomial_pmf
from .proportions import (
    ComparisonVerdict,
    ProportionComparison,
    compare_proportions,
    newcombe_difference_interval,
    trials_needed,
)

__all__ = [
    "EXACT_LIMIT",
    "PLANNING_POWER",
    "OneLookRule",
    "detectable_drop",
    "fixed_trials",
    "one_look_power",
    "planned_trials",
    "trials_for_power",
]

#: Power ``trialsNeeded`` and the adaptive run's fixed-count figure plan for.
PLANNING_POWER = 0.8

#: Largest trials per side searched; a decision that needs more is "more than 200".
EXACT_LIMIT = 200
#: Outcomes less likely than this on a side are left out of the sums.
_NEGLIGIBLE = 1e-12
#: Drops tried by :func:`detectable_drop`, in percentage points.
_DROPS = tuple(range(5, 101, 5))


@dataclass(frozen=True, slots=True)
class OneLookRule:
    """``compare``'s verdict rule at one look."""

    alpha: float
    """Interval level ``1 - alpha``; the unchanged rule's level."""
    change_alpha: float
    """A change needs the Fisher p-value below this (alpha shared over the family)."""
    margin: float
    """Largest change counted as unchanged."""


def _window(pmf: list[float]) -> list[tuple[int, float]]:
    return [(k, w) for k, w in enumerate(pmf) if w > _NEGLIGIBLE]


@lru_cache(maxsize=4096)
def _margin(n1: int, n2: int, total: int) -> tuple[list[float], list[float], list[float], int]:
    """The hypergeometric of BASE's passes given ``total``: by count, sorted, prefix sums."""
    low, high = max(0, total - n2), min(n1, total)
    log_all = _log_comb(n1 + n2, total)
    chances = [
        math.exp(_log_comb(n1, x) + _log_comb(n2, total - x) - log_all)
        for x in range(low, high + 1)
    ]
    ordered = sorted(chances)
    prefix = [0.0]
    for chance in ordered:
        prefix.append(prefix[-1] + chance)
    return chances, ordered, prefix, low


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _fisher(s1: int, n1: int, s2: int, n2: int) -> float:
    """Two-sided Fisher p-value in floating point (the search's own, not the report's)."""
    chances, ordered, prefix, low = _margin(n1, n2, s1 + s2)
    return min(1.0, prefix[bisect_right(ordered, chances[s1 - low] * (1 + 1e-7))])


@lru_cache(maxsize=65536)
def _decides(rule: OneLookRule, s1: int, n1: int, s2: int, n2: int) -> ComparisonVerdict:
    p_value = _fisher(s1, n1, s2, n2)
    low, high = newcombe_difference_interval(s1, n1, s2, n2, confidence=1.0 - rule.alpha)
    if p_value < rule.change_alpha and (low > 0.0 or high < 0.0):
        return "improved" if low > 0.0 else "regressed"
    if -rule.margin < low and high < rule.margin:
        return "unchanged"
    return "inconclusive"


def one_look_power(
    rule: OneLookRule,
    *,
    base_rate: float,
    head_rate: float,
    base_trials: int,
    head_trials: int,
    target: ComparisonVerdict,
) -> float:
    """Chance that ``compare`` decides ``target`` with these true rates and trials.

    For each BASE count, the HEAD counts ``compare`` decides ``target`` on form one
    run (below, above or around the BASE rate): its ends are found by bisection and
    its chance read from HEAD's cumulative binomial.
    """
    head_pmf = binomial_pmf(head_trials, head_rate)
    cumulative = [0.0]
    for chance in head_pmf:
        cumulative.append(cumulative[-1] + chance)
    total = 0.0
    for s1, w1 in _window(binomial_pmf(base_trials, base_rate)):
        low, high = _run(rule, s1, base_trials, head_trials, target)
        if low <= high:
            total += w1 * (cumulative[high + 1] - cumulative[low])
    return min(1.0, total)


def _run(
    rule: OneLookRule, s1: int, n1: int, n2: int, target: ComparisonVerdict
) -> tuple[int, int]:
    """The HEAD counts (first, last) on which ``compare`` decides ``target`` given ``s1``."""

    def hit(s2: int) -> bool:
        return _decides(rule, s1, n1, s2, n2) == target

    middle = round(s1 / n1 * n2)
    if target == "regressed":
        return 0, _last(hit, 0, middle)
    if target == "improved":
        return _first(hit, middle, n2), n2
    if not hit(middle):
        return 1, 0
    return _first(hit, 0, middle), _last(hit, middle, n2)


def _last(hit: Callable[[int], bool], low: int, high: int) -> int:
    """Largest ``k`` in [low, high] with ``hit(k)``, hits forming a prefix; ``low - 1`` if none."""
    if not hit(low):
        return low - 1
    while low < high:
        middle = (low + high + 1) // 2
        if hit(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _first(hit: Callable[[int], bool], low: int, high: int) -> int:
    """Smallest ``k`` in [low, high] with ``hit(k)``, hits a suffix; ``high + 1`` if none."""
    if not hit(high):
        return high + 1
    while low < high:
        middle = (low + high) // 2
        if hit(middle):
            high = middle
        else:
            low = middle + 1
    return low


def trials_for_power(
    rule: OneLookRule,
    *,
    base_rate: float,
    head_rate: float,
    target: ComparisonVerdict,
    power: float,
    start: int = 1,
) -> int | None:
    """Smallest trials per side (from ``start``) at which ``compare`` reaches ``power``.

    Starts from Fleiss's figure, grows it by a quarter until the power is reached,
    then bisects down (power is not quite monotone in the trials, so this is the
    smallest count the search meets). None when there is nothing to detect (equal
    rates for a change) or no count up to :data:`EXACT_LIMIT` per side reaches it
    (a change smaller than the margin may never be called unchanged that often: with
    more trials it becomes a significant change).
    """

    def enough(n: int) -> bool:
        found = one_look_power(
            rule,
            base_rate=base_rate,
            head_rate=head_rate,
            base_trials=n,
            head_trials=n,
            target=target,
        )
        return found >= power

    guess = _approximate(rule, base_rate, head_rate, target=target, power=power)
    if guess is None or guess > EXACT_LIMIT or start > EXACT_LIMIT:
        return None
    high = max(start, guess)
    while not enough(high):
        if high >= EXACT_LIMIT:
            return None
        high = min(EXACT_LIMIT, math.ceil(high * 1.25))
    low = max(start, 1)
    while low < high:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle + 1
    return high


def _approximate(
    rule: OneLookRule,
    p1: float,
    p2: float,
    *,
    target: ComparisonVerdict,
    power: float,
) -> int | None:
    """Fleiss's figure: the search's first guess."""
    if target == "unchanged":
        centre = (p1 + p2) / 2
        other = centre - rule.margin if centre - rule.margin >= 0.0 else centre + rule.margin
        found = trials_needed(centre, min(1.0, other), alpha=rule.alpha, power=power)
    else:
        found = trials_needed(p1, p2, alpha=rule.change_alpha, power=power) if p1 != p2 else None
    return found


def detectable_drop(power_at: Callable[[float], float], *, power: float = 0.8) -> int | None:
    """Smallest drop from 100% (in points, steps of 5) detected with ``power``; None if none.

    ``power_at(head_rate)`` is the chance of a ``regressed`` decision when BASE always
    passes and HEAD passes with ``head_rate``.
    """
    for drop in _DROPS:
        if power_at(1.0 - drop / 100) >= power:
            return drop
    return None


def planned_trials(
    comparison: ProportionComparison,
    *,
    alpha: float,
    change_alpha: float,
    margin: float,
    change: bool,
    start: int,
) -> int | None:
    """Trials per side at which ``compare``'s rule reaches :data:`PLANNING_POWER`.

    At the observed rates: for a change (``change``), the chance of deciding it at
    ``change_alpha``; for ruling one out, the chance of ``unchanged``. From ``start``
    trials up. None when a change has no difference to confirm, or no count up to
    :data:`EXACT_LIMIT` per side reaches the power.
    """
    p1, p2 = comparison.rate1, comparison.rate2
    if change and p1 == p2:
        return None
    target: ComparisonVerdict = ("improved" if p2 > p1 else "regressed") if change else "unchanged"
    return trials_for_power(
        OneLookRule(alpha=alpha, change_alpha=change_alpha, margin=margin),
        base_rate=p1,
        head_rate=p2,
        target=target,
        power=PLANNING_POWER,
        start=start,
    )


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
    at ``alpha / family``) or for ruling one out (unchanged, at ``alpha``), searched
    from one trial up. An adaptive run reports it as the fixed-count run that would
    reach the same decisions. None when a side has no graded trial.
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
