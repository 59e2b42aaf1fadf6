"""The sequential design's critical values, calibrated exactly for a fixed baseline.

A scenario with ``n0`` baseline trials is judged at planned looks ``n_1 < ... < n_K``
of HEAD trials. At every look the same two thresholds apply (a Pocock-type design):

- **a change** (``improved``/``regressed``) when the two-sided Fisher exact p-value is at
  most the *critical p-value* ``c`` and ``compare``'s interval (Newcombe at ``1 - alpha``)
  excludes 0 on that side;
- **unchanged** when the Newcombe interval of the difference at ``1 - e`` (the *look
  confidence*) lies strictly inside ``(-margin, +margin)``.

:func:`calibrate` picks the largest ``c`` whose worst-case error over the common pass
rate, computed exactly by enumerating every baseline and HEAD outcome
(:mod:`.exact`), is at most the scenario's share of ``alpha``; and the largest ``e``
(at most ``alpha``, from :data:`UNCHANGED_LEVELS`) whose worst-case chance of calling a
true change of the margin ``unchanged`` is at most ``alpha``. Both calibrations ignore
every other way the scenario may stop (futility, budgets, the other decision), which
only ever lowers those chances: the bounds hold for the whole rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .exact import Cell, binomial_pmf, fisher_table, horner, path_counts, worst_case
from .proportions import newcombe_difference_interval

__all__ = [
    "UNCHANGED_STEPS",
    "Calibration",
    "calibrate",
    "change_error",
    "decisions",
    "largest_holding",
    "margin_worst_case",
    "sides",
    "unchanged_error",
    "unchanged_levels",
    "unchanged_search",
]

#: Candidate levels ``e`` of the unchanged rule: alpha, alpha * 2^(-1/4), ..., this many steps.
UNCHANGED_STEPS = 40


def unchanged_levels(alpha: float) -> tuple[float, ...]:
    """The candidate levels of the unchanged rule, largest (``alpha``) first."""
    return tuple(alpha * 2 ** (-step / 4) for step in range(UNCHANGED_STEPS + 1))


@dataclass(frozen=True, slots=True)
class Calibration:
    """The two thresholds of a design for one baseline size, and what they achieve."""

    critical_p: float
    """A change needs a Fisher p-value at most this (0.0: no change can be decided)."""
    change_error: float
    """Worst case over the common pass rate of wrongly deciding a change (exact)."""
    unchanged_level: float
    """``e``: unchanged needs the interval at ``1 - e`` within the margin."""
    unchanged_error: float
    """Worst case, over true changes of exactly the margin, of deciding unchanged."""


@lru_cache(maxsize=512)
def sides(n0: int, n: int, alpha: float) -> tuple[tuple[int, ...], ...]:
    """Side of 0 of ``compare``'s interval (Newcombe at ``1 - alpha``) for every ``(s0, x)``.

    ``1`` when the whole interval is above 0, ``-1`` when below, ``0`` otherwise.
    """
    rows = []
    for s0 in range(n0 + 1):
        row = []
        for x in range(n + 1):
            low, high = newcombe_difference_interval(s0, n0, x, n, confidence=1.0 - alpha)
            row.append(1 if low > 0.0 else -1 if high < 0.0 else 0)
        rows.append(tuple(row))
    return tuple(rows)


def _inside(s0: int, n0: int, x: int, n: int, *, level: float, margin: float) -> bool:
    if level <= 0.0:
        return False
    low, high = newcombe_difference_interval(s0, n0, x, n, confidence=1.0 - level)
    return -margin < low and high < margin


@lru_cache(maxsize=1024)
def decisions(
    n0: int, n: int, *, critical_p: float, alpha: float, margin: float, level: float
) -> tuple[tuple[Cell, ...], ...]:
    """The per-look rule for every baseline count ``s0`` and HEAD passes ``x`` of ``n``.

    ``regressed``/``improved`` when the Fisher p-value is at most ``critical_p`` and
    ``compare``'s interval excludes 0 on that side, else ``unchanged`` when the interval
    at ``1 - level`` lies inside the margin, else ``continue``.
    """
    fisher = fisher_table(n0, n)
    side = sides(n0, n, alpha)
    rows = []
    for s0 in range(n0 + 1):
        row: list[Cell] = []
        for x in range(n + 1):
            if fisher[s0][x] <= critical_p and side[s0][x]:
                row.append("improved" if side[s0][x] > 0 else "regressed")
            elif n0 and n and _inside(s0, n0, x, n, level=level, margin=margin):
                row.append("unchanged")
            else:
                row.append("continue")
        rows.append(tuple(row))
    return tuple(rows)


@lru_cache(maxsize=256)
def calibrate(
    n0: int, looks: tuple[int, ...], *, share: float, alpha: float, margin: float
) -> Calibration:
    """Calibrate both thresholds for ``n0`` baseline trials and these looks.

    Args:
        n0: Baseline graded trials (at least 1).
        looks: Planned looks, increasing.
        share: The scenario's error budget for changes (``alpha / family``).
        alpha: The run's alpha: compare's interval level, and the unchanged budget.
        margin: Largest change counted as unchanged.
    """
    critical, change_error = _critical_p(n0, looks, share=share, alpha=alpha)
    level, unchanged_error = _unchanged_level(n0, looks, alpha=alpha, margin=margin)
    return Calibration(
        critical_p=critical,
        change_error=change_error,
        unchanged_level=level,
        unchanged_error=unchanged_error,
    )


def change_error(n0: int, looks: tuple[int, ...], *, critical_p: float, alpha: float) -> float:
    """Worst case over the common pass rate of a wrong change with this critical p-value."""
    tables = [(fisher_table(n0, n), sides(n0, n, alpha)) for n in looks]

    def rule(s0: int, k: int, x: int) -> Cell:
        fisher, side = tables[k]
        if fisher[s0][x] <= critical_p and side[s0][x]:
            return "improved" if side[s0][x] > 0 else "regressed"
        return "continue"

    polynomial = path_counts(n0, looks, rule).null_polynomial(("improved", "regressed"))
    return worst_case(lambda p: horner(polynomial, p))[0]


def _critical_p(
    n0: int, looks: tuple[int, ...], *, share: float, alpha: float
) -> tuple[float, float]:
    """Largest attainable Fisher p-value below ``share`` whose worst-case error is <= share."""
    candidates = sorted({p for n in looks for row in fisher_table(n0, n) for p in row if p < share})
    return largest_holding(
        candidates, lambda c: change_error(n0, looks, critical_p=c, alpha=alpha), share
    )


def largest_holding(
    candidates: Sequence[float], error: Callable[[float], float], bound: float
) -> tuple[float, float]:
    """The largest of the increasing ``candidates`` whose ``error`` is at most ``bound``, and
    that error (binary search: the error grows with the candidate); ``(0.0, 0.0)`` for none."""
    low, high = 0, len(candidates) - 1
    best: tuple[float, float] = (0.0, 0.0)
    while low <= high:
        middle = (low + high) // 2
        found = error(candidates[middle])
        if found <= bound:
            best = (candidates[middle], found)
            low = middle + 1
        else:
            high = middle - 1
    return best


def unchanged_error(
    n0: int, looks: tuple[int, ...], *, level: float, alpha: float, margin: float
) -> float:
    """Worst case, over true differences of exactly ``margin``, of deciding unchanged."""
    rows = {
        (k, s0): {x for x in range(n + 1) if _inside(s0, n0, x, n, level=level, margin=margin)}
        for k, n in enumerate(looks)
        for s0 in range(n0 + 1)
    }
    if not any(rows.values()):
        return 0.0

    def rule(s0: int, k: int, x: int) -> Cell:
        return "unchanged" if x in rows[(k, s0)] else "continue"

    polynomials = path_counts(n0, looks, rule).head_polynomials(("unchanged",))

    def chance(p0: float, p1: float) -> float:
        return math.fsum(
            weight * horner(polynomial, p1)
            for weight, polynomial in zip(binomial_pmf(n0, p0), polynomials, strict=True)
            if polynomial is not None and weight > 1e-15
        )

    return margin_worst_case(margin, chance)


def margin_worst_case(
    margin: float, chance: Callable[[float, float], float], *, grid: int = 40
) -> float:
    """Largest ``chance(p0, p1)`` over true differences ``p1 - p0`` of exactly ``±margin``."""
    worst = 0.0
    for sign in (-1.0, 1.0):
        low, high = (margin, 1.0) if sign < 0 else (0.0, 1.0 - margin)
        if high < low:
            continue

        def along(t: float, sign: float = sign, low: float = low, high: float = high) -> float:
            p0 = low + t * (high - low)
            return chance(p0, min(1.0, max(0.0, p0 + sign * margin)))

        worst = max(worst, worst_case(along, grid=grid)[0])
    return worst


def _unchanged_level(
    n0: int, looks: tuple[int, ...], *, alpha: float, margin: float
) -> tuple[float, float]:
    """Largest candidate level whose worst-case wrong-unchanged chance is at most alpha."""
    return unchanged_search(
        alpha, lambda level: unchanged_error(n0, looks, level=level, alpha=alpha, margin=margin)
    )


def unchanged_search(alpha: float, error: Callable[[float], float]) -> tuple[float, float]:
    """Largest of :func:`unchanged_levels` whose ``error`` is at most ``alpha``, and that
    error (``alpha`` itself first; ``(0.0, 0.0)``: unchanged is never decided)."""
    levels = unchanged_levels(alpha)
    first = error(levels[0])
    if first <= alpha:
        return levels[0], first
    low, high = 1, len(levels) - 1
    best = (0.0, 0.0)  # no candidate holds: unchanged is never decided
    while low <= high:
        middle = (low + high) // 2
        found = error(levels[middle])
        if found <= alpha:
            best = (levels[middle], found)
            high = middle - 1
        else:
            low = middle + 1
    return best
