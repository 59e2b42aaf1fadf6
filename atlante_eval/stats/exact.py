"""Exact distributions behind the sequential design: Fisher tables and outcome enumeration.

Everything an adaptive run can observe for one scenario is a baseline count ``s0``
of ``n0`` graded trials and, at each planned look ``n_k``, HEAD's passes ``x``. A
stopping rule is a table of what it does in every such state (:data:`Cell`). This
module enumerates every outcome exactly: :func:`path_counts` counts, per baseline
count, the HEAD pass/fail sequences that reach each state without having stopped
before (integers: no sampling, no rounding), and :class:`Outcomes` turns those counts
into probabilities for any true pass rates: the chance of each decision, the
expected trials, and the worst case over a common pass rate. Tables are cached, so
the same design is computed once per process.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Literal

__all__ = [
    "CELL_CODES",
    "Cell",
    "Outcomes",
    "binomial_pmf",
    "build_fisher_table",
    "fisher_table",
    "horner",
    "path_counts",
    "worst_case",
]

#: What a stopping rule does in one state: go on, or stop with this outcome.
Cell = Literal["continue", "regressed", "improved", "unchanged", "undecidable"]
#: Every stop a rule can make, plus ``max-trials`` (still undecided at the last look).
CELL_CODES: tuple[str, ...] = ("regressed", "improved", "unchanged", "undecidable", "max-trials")
#: Fisher's two-sided test counts tables at most ``1 + 1e-7`` times as likely as the
#: observed one (R's and scipy's rule), as :func:`.proportions.fisher_exact_two_sided`.
_FISHER_SCALE = 10**7


@lru_cache(maxsize=256)
def fisher_table(n0: int, n: int) -> tuple[tuple[float, ...], ...]:
    """Two-sided Fisher exact p-values of ``s0/n0`` against ``x/n`` for every ``s0`` and ``x``.

    ``fisher_table(n0, n)[s0][x]`` equals ``fisher_exact_two_sided(s0, n0, x, n)`` bit
    for bit (the same integer sums, the same division), computed a margin at a time:
    every table with the same total passes shares one hypergeometric distribution.
    Cached: the design's tables are small and reused at every look.
    """
    return build_fisher_table(n0, n)


def build_fisher_table(n0: int, n: int) -> tuple[tuple[float, ...], ...]:
    """:func:`fisher_table` without the cache (large tables of a one-off search)."""
    rows = [[1.0] * (n + 1) for _ in range(n0 + 1)]
    for total in range(n0 + n + 1):
        low, high = max(0, total - n), min(n0, total)
        weights = [math.comb(n0, s) * math.comb(n, total - s) for s in range(low, high + 1)]
        scaled = sorted(w * _FISHER_SCALE for w in weights)
        prefix = list(accumulate(sorted(weights)))
        denominator = math.comb(n0 + n, total)
        for offset, weight in enumerate(weights):
            upto = bisect_right(scaled, weight * (_FISHER_SCALE + 1))
            s = low + offset
            rows[s][total - s] = min(1.0, prefix[upto - 1] / denominator)
    return tuple(tuple(row) for row in rows)


#: Largest ``n`` whose binomial terms are computed with exact coefficients (they fit
#: a float up to about 1,020 trials).
_EXACT_PMF_TRIALS = 1000


def binomial_pmf(n: int, p: float) -> list[float]:
    """``P(X = k)`` for ``k = 0..n`` with ``X ~ Binomial(n, p)`` (exact endpoints at 0 and 1)."""
    if p <= 0.0:
        return [1.0] + [0.0] * n
    if p >= 1.0:
        return [0.0] * n + [1.0]
    q = 1.0 - p
    if n <= _EXACT_PMF_TRIALS:
        return [math.comb(n, k) * p**k * q ** (n - k) for k in range(n + 1)]
    # Beyond, comb(n, k) no longer fits a float: the same terms in log space (linear).
    log_p, log_q, log_n = math.log(p), math.log(q), math.lgamma(n + 1)
    return [
        math.exp(log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q)
        for k in range(n + 1)
    ]


#: ``rule(s0, k, x)``: what the rule does at look ``k`` (0-based) with HEAD passes ``x``.
Rule = Callable[[int, int, int], Cell]


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Every outcome of one scenario under a stopping rule, as exact integer path counts.

    ``counts[s0][k][code]`` lists, for ``x = 0..looks[k]``, how many HEAD pass/fail
    sequences of length ``looks[k]`` with ``x`` passes stop at look ``k`` with outcome
    ``code`` (one of :data:`CELL_CODES`); the probability of one such sequence is
    ``p1**x * (1 - p1)**(looks[k] - x)``.
    """

    n0: int
    """Baseline graded trials."""
    looks: tuple[int, ...]
    """Planned looks (HEAD graded trials)."""
    counts: tuple[tuple[dict[str, tuple[int, ...]], ...], ...]
    """Per baseline count, per look: stopped sequences by outcome and HEAD passes."""

    def chances(self, p0: float, p1: float) -> dict[str, float]:
        """Probability of each outcome when BASE passes with ``p0`` and HEAD with ``p1``.

        The baseline is random too (``Binomial(n0, p0)``): this is the chance over
        both runs, the error rate or power a design promises.
        """
        found = dict.fromkeys(CELL_CODES, 0.0)
        for s0, weight in enumerate(binomial_pmf(self.n0, p0)):
            if weight == 0.0:
                continue
            for code, chance in self.given_baseline(s0, p1).items():
                found[code] += weight * chance
        return found

    def given_baseline(self, s0: int, p1: float) -> dict[str, float]:
        """Probability of each outcome given the baseline's ``s0`` passes (HEAD at ``p1``)."""
        found = dict.fromkeys(CELL_CODES, 0.0)
        powers = _powers(p1, self.looks[-1])
        for k, stops in enumerate(self.counts[s0]):
            n = self.looks[k]
            for code, row in stops.items():
                found[code] += math.fsum(
                    c * powers[0][x] * powers[1][n - x] for x, c in enumerate(row) if c
                )
        return found

    def expected_trials(self, p0: float, p1: float) -> float:
        """Mean HEAD graded trials before the scenario stops (no budget limit)."""
        total = 0.0
        for s0, weight in enumerate(binomial_pmf(self.n0, p0)):
            if weight == 0.0:
                continue
            powers = _powers(p1, self.looks[-1])
            for k, stops in enumerate(self.counts[s0]):
                n = self.looks[k]
                mass = math.fsum(
                    c * powers[0][x] * powers[1][n - x]
                    for row in stops.values()
                    for x, c in enumerate(row)
                    if c
                )
                total += weight * mass * n
        return total

    def null_polynomial(self, codes: Sequence[str]) -> tuple[float, ...]:
        """The chance of ``codes`` under a common pass rate ``p``, as one polynomial.

        Returns ``A`` with the chance equal to ``sum_j A[j] * p**j * (1 - p)**(D - j)``,
        ``D = n0 + looks[-1]``: the exact integer path counts of every look, weighted by
        the baseline's binomial coefficients and raised to the common degree ``D``
        (``p + (1 - p) = 1``), then made floats once. Evaluate with :func:`horner`.
        """
        top = self.n0 + self.looks[-1]
        total = [0] * (top + 1)
        for k, n in enumerate(self.looks):
            degree = self.n0 + n
            coefficients = [0] * (degree + 1)
            for s0 in range(self.n0 + 1):
                weight = math.comb(self.n0, s0)
                for code in codes:
                    for x, c in enumerate(self.counts[s0][k].get(code, ())):
                        if c:
                            coefficients[s0 + x] += weight * c
            _raise(coefficients, top - degree, total)
        return tuple(float(c) for c in total)

    def head_polynomials(self, codes: Sequence[str]) -> tuple[tuple[float, ...] | None, ...]:
        """Per baseline count, the chance of ``codes`` as one polynomial in HEAD's rate.

        Degree ``looks[-1]`` (see :meth:`null_polynomial`); None for a baseline count
        under which ``codes`` never happen.
        """
        top = self.looks[-1]
        found: list[tuple[float, ...] | None] = []
        for s0 in range(self.n0 + 1):
            total = [0] * (top + 1)
            for k, n in enumerate(self.looks):
                coefficients = [0] * (n + 1)
                for code in codes:
                    for x, c in enumerate(self.counts[s0][k].get(code, ())):
                        coefficients[x] += c
                if any(coefficients):
                    _raise(coefficients, top - n, total)
            found.append(tuple(float(c) for c in total) if any(total) else None)
        return tuple(found)


def _raise(coefficients: list[int], by: int, into: list[int]) -> None:
    """Add ``coefficients`` (degree d) raised to degree ``d + by`` into ``into``."""
    step = [math.comb(by, i) for i in range(by + 1)]
    for j, c in enumerate(coefficients):
        if c:
            for i, ways in enumerate(step):
                into[j + i] += c * ways


def horner(coefficients: Sequence[float], p: float) -> float:
    """``sum_j A[j] * p**j * (1 - p)**(D - j)`` for ``A = coefficients`` of degree ``D``."""
    top = len(coefficients) - 1
    if p <= 0.0:
        return coefficients[0]
    if p >= 1.0:
        return coefficients[top]
    q = 1.0 - p
    if p <= 0.5:
        ratio, value = p / q, 0.0
        for c in reversed(coefficients):
            value = value * ratio + c
        return value * q**top
    ratio, value = q / p, 0.0
    for c in coefficients:
        value = value * ratio + c
    return value * p**top


def _powers(p: float, n: int) -> tuple[list[float], list[float]]:
    q = 1.0 - p
    return [p**j for j in range(n + 1)], [q**j for j in range(n + 1)]


def path_counts(n0: int, looks: tuple[int, ...], rule: Rule) -> Outcomes:
    """Enumerate every outcome of ``rule``: exact path counts per baseline count and look.

    HEAD's passes between looks are binomial, so the number of sequences reaching
    ``x`` passes at the next look is a convolution with binomial coefficients of the
    sequences still going. Sequences still going at the last look stop as
    ``max-trials``.
    """
    per_baseline = []
    for s0 in range(n0 + 1):
        going = [1]
        done = 0
        stops_by_look = []
        for k, n in enumerate(looks):
            step = [math.comb(n - done, j) for j in range(n - done + 1)]
            reached = [0] * (n + 1)
            for x, c in enumerate(going):
                if c:
                    for j, ways in enumerate(step):
                        reached[x + j] += c * ways
            done = n
            stops: dict[str, list[int]] = {}
            going = [0] * (n + 1)
            last = k == len(looks) - 1
            for x, c in enumerate(reached):
                if not c:
                    continue
                cell = rule(s0, k, x)
                if cell == "continue" and last:
                    cell = "max-trials"  # type: ignore[assignment]
                if cell == "continue":
                    going[x] = c
                else:
                    stops.setdefault(cell, [0] * (n + 1))[x] += c
            stops_by_look.append({code: tuple(row) for code, row in stops.items()})
        per_baseline.append(tuple(stops_by_look))
    return Outcomes(n0=n0, looks=looks, counts=tuple(per_baseline))


#: Points of the grid over the common pass rate before the maxima are refined.
GRID = 100


def worst_case(chance: Callable[[float], float], *, grid: int = GRID) -> tuple[float, float]:
    """Largest ``chance(p)`` over ``p`` in [0, 1]: ``(value, p)``.

    Evaluated on a grid of ``grid + 1`` points, then refined by golden-section search
    around each of the two best grid points (the function is a polynomial, smooth
    between grid points).
    """
    points = [i / grid for i in range(grid + 1)]
    values = [chance(p) for p in points]
    best = sorted(range(len(points)), key=values.__getitem__, reverse=True)[:2]
    found = max((values[i], points[i]) for i in best)
    for i in best:
        low, high = points[max(0, i - 1)], points[min(grid, i + 1)]
        refined = _argmax(chance, low, high)
        found = max(found, refined)
    return found


def _argmax(function: Callable[[float], float], low: float, high: float) -> tuple[float, float]:
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = function(c), function(d)
    for _ in range(25):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = function(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = function(d)
    return max((fc, c), (fd, d))
