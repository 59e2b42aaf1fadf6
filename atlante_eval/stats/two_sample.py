"""Decide an arm against a control that grows with it, at exactly the stated error rate.

An adaptive run with arms (docs/variants.md) has no fixed baseline: the control
arm and every other arm of a scenario get trials in the same randomized blocks,
so at each planned look ``n_1 < ... < n_K`` both sides of a comparison have
``n_k`` trials. The decision rule is the fixed-baseline design's
(:func:`.boundaries.decisions`, Pocock-type: the same thresholds at every look);
what changes is the calibration, because the control's count is random at every
look too:

- the **critical p-value** is the largest whose worst case over the common pass
  rate of deciding a change that is not there, over every look and every outcome
  of *both* sides, is at most ``alpha / family``;
- the **look confidence** of the unchanged rule is the largest (from
  :func:`.boundaries.unchanged_levels`) whose worst case, over true differences of
  exactly the margin, of calling them unchanged is at most ``alpha``.

Both are computed exactly by enumerating every pair of pass/fail sequences
(:func:`two_sample_counts`: integer path counts, no sampling); they depend only on
the looks, alpha, margin and the family, so one calibration serves every scenario
and arm of a run (cached per process). Futility (:func:`arm_decidable`): at a look
that decides nothing, the comparison stops once the chance of any decision by the
last look, predicted for both sides from what they showed so far (the uniform-prior
Pólya urn of :mod:`.futility`), is below :data:`.futility.FUTILITY`. Later futility
stops are not counted there, so that chance is an upper bound and the stop is
conservative; it never decides a change, so it only lowers the error rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from .boundaries import (
    Calibration,
    decisions,
    largest_holding,
    margin_worst_case,
    sides,
    unchanged_search,
)
from .exact import Cell, fisher_table, horner, worst_case
from .futility import predictive
from .proportions import newcombe_difference_interval
from .sequential import Look, SequentialDesign, judge_look, undecided_look

__all__ = [
    "METHOD",
    "TwoSampleCounts",
    "arm_calibration",
    "arm_decidable",
    "assess_arm",
    "two_sample_change_error",
    "two_sample_counts",
    "two_sample_unchanged_error",
]

#: The design's name in the decision record.
METHOD: Literal["exact-pocock-arms"] = "exact-pocock-arms"

#: ``rule(k, s, x)``: what the rule does at look ``k`` with control passes ``s`` and arm
#: passes ``x`` (both of ``looks[k]``).
TwoSampleRule = Callable[[int, int, int], Cell]
Grid = list[list[int]]


@dataclass(frozen=True, slots=True)
class TwoSampleCounts:
    """Every outcome of a balanced two-sample rule, as exact integer path counts.

    ``stops[k][code][s][x]`` is how many pairs of pass/fail sequences (control and
    arm, ``looks[k]`` trials each) with ``s`` and ``x`` passes stop at look ``k`` with
    outcome ``code``; one such pair has probability
    ``p0**s (1-p0)**(n-s) p1**x (1-p1)**(n-x)``.
    """

    looks: tuple[int, ...]
    stops: tuple[dict[str, tuple[tuple[int, ...], ...]], ...]

    def chance(self, codes: tuple[str, ...], p0: float, p1: float) -> float:
        """Probability of any of ``codes`` when the control passes with ``p0``, the arm ``p1``."""
        top = self.looks[-1]
        control = ([p0**j for j in range(top + 1)], [(1.0 - p0) ** j for j in range(top + 1)])
        arm = ([p1**j for j in range(top + 1)], [(1.0 - p1) ** j for j in range(top + 1)])
        total = 0.0
        for k, n in enumerate(self.looks):
            for code in codes:
                for s, row in enumerate(self.stops[k].get(code, ())):
                    weight = control[0][s] * control[1][n - s]
                    if weight > 0.0:
                        total += weight * math.fsum(
                            c * arm[0][x] * arm[1][n - x] for x, c in enumerate(row) if c
                        )
        return total

    def null_polynomial(self, codes: tuple[str, ...]) -> tuple[float, ...]:
        """The chance of ``codes`` under one common pass rate ``p``, as a polynomial.

        ``sum_j A[j] p**j (1-p)**(D-j)`` with ``D = 2 * looks[-1]`` (evaluate with
        :func:`.exact.horner`): a pair with ``s + x`` passes of ``2 n`` has chance
        ``p**(s+x) (1-p)**(2n-s-x)``, raised to the common degree.
        """
        top = 2 * self.looks[-1]
        total = [0] * (top + 1)
        for k, n in enumerate(self.looks):
            coefficients = [0] * (2 * n + 1)
            for code in codes:
                for s, row in enumerate(self.stops[k].get(code, ())):
                    for x, c in enumerate(row):
                        if c:
                            coefficients[s + x] += c
            step = [math.comb(top - 2 * n, i) for i in range(top - 2 * n + 1)]
            for j, c in enumerate(coefficients):
                if c:
                    for i, ways in enumerate(step):
                        total[j + i] += c * ways
        return tuple(float(c) for c in total)


def _grow(going: Grid, n: int, following: int) -> Grid:
    """Path counts at ``following`` trials a side from those at ``n``: both sides add
    ``following - n`` trials, each pass/fail sequence counted once."""
    more = following - n
    step = [math.comb(more, j) for j in range(more + 1)]
    wide = [[0] * (n + 1) for _ in range(following + 1)]
    for s, row in enumerate(going):
        for x, c in enumerate(row):
            if c:
                for i, ways in enumerate(step):
                    wide[s + i][x] += c * ways
    grown = [[0] * (following + 1) for _ in range(following + 1)]
    for s, row in enumerate(wide):
        target = grown[s]
        for x, c in enumerate(row):
            if c:
                for j, ways in enumerate(step):
                    target[x + j] += c * ways
    return grown


def two_sample_counts(looks: tuple[int, ...], rule: TwoSampleRule) -> TwoSampleCounts:
    """Enumerate every outcome of ``rule`` over both sides' sequences, look by look.

    Pairs still going at the last look stop as ``max-trials``.
    """
    going: Grid = [[1]]
    done = 0
    stops: list[dict[str, tuple[tuple[int, ...], ...]]] = []
    for k, n in enumerate(looks):
        reached = _grow(going, done, n)
        done = n
        last = k == len(looks) - 1
        found: dict[str, list[list[int]]] = {}
        going = [[0] * (n + 1) for _ in range(n + 1)]
        for s, row in enumerate(reached):
            for x, c in enumerate(row):
                if not c:
                    continue
                cell: str = rule(k, s, x)
                if cell == "continue" and last:
                    cell = "max-trials"
                if cell == "continue":
                    going[s][x] = c
                else:
                    found.setdefault(cell, [[0] * (n + 1) for _ in range(n + 1)])[s][x] += c
        stops.append({code: tuple(tuple(row) for row in grid) for code, grid in found.items()})
    return TwoSampleCounts(looks=looks, stops=tuple(stops))


@lru_cache(maxsize=64)
def two_sample_change_error(looks: tuple[int, ...], *, critical_p: float, alpha: float) -> float:
    """Worst case over the common pass rate of a wrong change with this critical p-value."""
    tables = [(fisher_table(n, n), sides(n, n, alpha)) for n in looks]

    def rule(k: int, s: int, x: int) -> Cell:
        fisher, side = tables[k]
        if fisher[s][x] <= critical_p and side[s][x]:
            return "improved" if side[s][x] > 0 else "regressed"
        return "continue"

    polynomial = two_sample_counts(looks, rule).null_polynomial(("improved", "regressed"))
    return worst_case(lambda p: horner(polynomial, p))[0]


def _inside(n: int, level: float, margin: float) -> frozenset[tuple[int, int]]:
    """The states ``(s, x)`` at ``n`` trials a side whose interval at ``1 - level`` is
    inside the margin."""
    found = set()
    for s in range(n + 1):
        for x in range(n + 1):
            low, high = newcombe_difference_interval(s, n, x, n, confidence=1.0 - level)
            if -margin < low and high < margin:
                found.add((s, x))
    return frozenset(found)


@lru_cache(maxsize=256)
def two_sample_unchanged_error(
    looks: tuple[int, ...], *, level: float, margin: float, grid: int = 40
) -> float:
    """Worst case, over true differences of exactly ``margin``, of deciding unchanged."""
    if level <= 0.0:
        return 0.0
    inside = [_inside(n, level, margin) for n in looks]
    if not any(inside):
        return 0.0

    def rule(k: int, s: int, x: int) -> Cell:
        return "unchanged" if (s, x) in inside[k] else "continue"

    counts = two_sample_counts(looks, rule)
    return margin_worst_case(
        margin, lambda p0, p1: counts.chance(("unchanged",), p0, p1), grid=grid
    )


@lru_cache(maxsize=64)
def arm_calibration(
    looks: tuple[int, ...], *, share: float, alpha: float, margin: float
) -> Calibration:
    """Calibrate both thresholds of the two-sample design for these looks."""
    candidates = sorted({p for n in looks for row in fisher_table(n, n) for p in row if p < share})
    critical, change = largest_holding(
        candidates,
        lambda c: two_sample_change_error(looks, critical_p=c, alpha=alpha),
        share,
    )
    level, unchanged = unchanged_search(
        alpha, lambda level: two_sample_unchanged_error(looks, level=level, margin=margin)
    )
    return Calibration(
        critical_p=critical, change_error=change, unchanged_level=level, unchanged_error=unchanged
    )


def assess_arm(
    design: SequentialDesign,
    *,
    control_passed: int,
    control_graded: int,
    passed: int,
    graded: int,
    look: int | None = None,
) -> Look:
    """Judge one look of an arm (``passed/graded``) against the control at the same look.

    ``look`` is the planned look (the wave's target trials; default the last). Fewer
    graded trials than planned on either side (infra-errors) are judged as they are,
    each side's later looks shifted by its own shortfall.
    """
    if not control_graded or not graded:
        return undecided_look(passed, graded, (control_passed, control_graded))
    found = arm_calibration(
        design.looks, share=design.share, alpha=design.alpha, margin=design.margin
    )
    rule = (found.critical_p, design.alpha, design.margin, found.unchanged_level)

    def decidable(index: int) -> float:
        later = tuple(n - design.looks[index] for n in design.looks[index + 1 :])
        return arm_decidable((control_passed, control_graded), (passed, graded), later, rule)

    return judge_look(
        design,
        base=(control_passed, control_graded),
        head=(passed, graded),
        critical_p=found.critical_p,
        level=found.unchanged_level,
        look_confidence=1.0 - found.unchanged_level,
        look=look,
        decidable=decidable,
    )


@lru_cache(maxsize=4096)
def arm_decidable(
    control: tuple[int, int],
    arm: tuple[int, int],
    later: tuple[int, ...],
    rule: tuple[float, float, float, float],
) -> float:
    """Chance of a decision at one of the ``later`` looks (trials added to each side).

    Both sides' further trials are predicted from what they showed (``(passed,
    graded)``) by the Pólya urn; each later look is judged by ``rule`` (critical p,
    alpha, margin, level); a state that decides stops there.
    """
    critical_p, alpha, margin, level = rule
    (s0, n0), (x0, n1) = control, arm
    going: dict[tuple[int, int], float] = {(0, 0): 1.0}  # passes added to each side
    done, decided = 0, 0.0
    for added in later:
        more = added - done
        spread: dict[tuple[int, int], float] = {}
        for (ds, dx), mass in going.items():
            left = predictive(s0 + ds, n0 + done, more)
            right = predictive(x0 + dx, n1 + done, more)
            for i, a in enumerate(left):
                if a == 0.0:
                    continue
                for j, b in enumerate(right):
                    key = (ds + i, dx + j)
                    spread[key] = spread.get(key, 0.0) + mass * a * b
        done = added
        cells = decisions(
            n0 + done, n1 + done, critical_p=critical_p, alpha=alpha, margin=margin, level=level
        )
        going = {}
        for (ds, dx), mass in spread.items():
            if cells[s0 + ds][x0 + dx] != "continue":
                decided += mass
            else:
                going[(ds, dx)] = mass
    return min(1.0, decided)
