"""The overall comparison across scenarios, stratified by scenario (never pooled).

Pooling raw counts across scenarios is confounded whenever the scenarios' trial
counts differ between the runs (a merged baseline, uneven infra-errors, an adaptive
run): BASE ``a = 20/20, b = 0/4`` against HEAD ``a = 4/4, b = 0/20`` pools to
20/24 against 4/24 although neither scenario changed. Each scenario is therefore a
stratum, compared only with itself:

- **the test** is the exact conditional test of no difference in any scenario (the
  exact Cochran-Mantel-Haenszel test): given each scenario's margins, HEAD's passes
  are hypergeometric per scenario, their total the convolution; the two-sided p-value
  sums the totals at most ``1 + 1e-7`` times as likely as the observed one (R's
  ``mantelhaen.test(exact = TRUE)`` rule; Fisher's test for one scenario);
- **the rates and the difference** are Mantel-Haenszel weighted means over the
  scenarios (weight ``n1 n2 / (n1 + n2)`` per scenario: equal weights when every
  scenario has the same trials), so a scenario's share does not depend on how many
  trials each run happened to give it;
- **the intervals** are MOVER combinations (Zou and Donner) of the scenarios'
  Wilson intervals: for one scenario, the difference's is Newcombe's interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .proportions import wilson_interval

__all__ = ["StratifiedComparison", "Stratum", "stratified_comparison", "stratified_exact_test"]

_TIES = 1.0 + 1e-7


@dataclass(frozen=True, slots=True)
class Stratum:
    """One scenario's counts: BASE ``s1/n1`` and HEAD ``s2/n2`` (graded trials)."""

    s1: int
    n1: int
    s2: int
    n2: int


@dataclass(frozen=True, slots=True)
class StratifiedComparison:
    """BASE against HEAD over several scenarios, each compared only with itself."""

    rate1: float
    """BASE's weighted pass rate."""
    rate2: float
    """HEAD's weighted pass rate (same weights)."""
    interval1: tuple[float, float]
    """Interval of ``rate1`` (MOVER over the scenarios' Wilson intervals)."""
    interval2: tuple[float, float]
    """Interval of ``rate2``."""
    difference: float
    """``rate2 - rate1``: the weighted mean of the scenarios' differences."""
    difference_interval: tuple[float, float]
    """Interval of the difference (MOVER; Newcombe's for one scenario)."""
    p_value: float
    """Exact stratified test of no difference in any scenario."""
    strata: int
    """Scenarios with graded trials on both sides (the others carry no comparison)."""


def stratified_comparison(
    strata: Sequence[Stratum], *, confidence: float = 0.95
) -> StratifiedComparison:
    """Compare BASE with HEAD over ``strata``; scenarios without trials on a side are left out."""
    used = [s for s in strata if s.n1 and s.n2]
    if not used:
        return StratifiedComparison(0.0, 0.0, (0.0, 1.0), (0.0, 1.0), 0.0, (-1.0, 1.0), 1.0, 0)
    raw = [s.n1 * s.n2 / (s.n1 + s.n2) for s in used]
    weights = [w / math.fsum(raw) for w in raw]
    base = [(s.s1 / s.n1, wilson_interval(s.s1, s.n1, confidence=confidence)) for s in used]
    head = [(s.s2 / s.n2, wilson_interval(s.s2, s.n2, confidence=confidence)) for s in used]
    rate1 = math.fsum(w * p for w, (p, _) in zip(weights, base, strict=True))
    rate2 = math.fsum(w * p for w, (p, _) in zip(weights, head, strict=True))
    terms = [(w, p, bounds) for w, (p, bounds) in zip(weights, head, strict=True)]
    terms += [(-w, p, bounds) for w, (p, bounds) in zip(weights, base, strict=True)]
    return StratifiedComparison(
        rate1=rate1,
        rate2=rate2,
        interval1=_mover([(w, p, b) for w, (p, b) in zip(weights, base, strict=True)], rate1),
        interval2=_mover([(w, p, b) for w, (p, b) in zip(weights, head, strict=True)], rate2),
        difference=rate2 - rate1,
        difference_interval=_mover(terms, rate2 - rate1, low=-1.0),
        p_value=stratified_exact_test(used),
        strata=len(used),
    )


def _mover(
    terms: Sequence[tuple[float, float, tuple[float, float]]], estimate: float, *, low: float = 0.0
) -> tuple[float, float]:
    """MOVER interval of ``sum(c * p)`` from each ``p``'s interval (independent estimates)."""
    below = above = 0.0
    for c, p, (lower, upper) in terms:
        if c >= 0.0:
            below += (c * (p - lower)) ** 2
            above += (c * (upper - p)) ** 2
        else:
            below += (c * (p - upper)) ** 2
            above += (c * (lower - p)) ** 2
    return (max(low, estimate - math.sqrt(below)), min(1.0, estimate + math.sqrt(above)))


def stratified_exact_test(strata: Sequence[Stratum]) -> float:
    """Two-sided exact conditional test of no difference in any stratum.

    Conditional on each stratum's margins, HEAD's passes in it are hypergeometric;
    the total over the strata has the convolution of those distributions. The
    p-value is the chance of a total at most ``1 + 1e-7`` times as likely as the
    observed one. Strata whose margins leave one possible table add nothing.
    """
    distribution = [1.0]
    observed = 0
    for s in strata:
        if not s.n1 or not s.n2:
            continue
        total = s.s1 + s.s2
        low, high = max(0, total - s.n1), min(s.n2, total)
        if low == high:
            continue
        scale = math.comb(s.n1 + s.n2, total)
        pmf = [
            math.comb(s.n2, y) * math.comb(s.n1, total - y) / scale for y in range(low, high + 1)
        ]
        observed += s.s2 - low
        merged = [0.0] * (len(distribution) + len(pmf) - 1)
        for i, a in enumerate(distribution):
            if a:
                for j, b in enumerate(pmf):
                    merged[i + j] += a * b
        distribution = merged
    if len(distribution) == 1:
        return 1.0
    bound = distribution[observed] * _TIES
    return min(1.0, math.fsum(p for p in distribution if p <= bound))
