"""Two-sample rank-sum test (Wilcoxon-Mann-Whitney), exact with ties.

Used to compare per-trial counts and amounts between two sets of trials (tool
calls per trial, turns, tokens, cost, duration): no distribution is assumed, ties
are common (many trials make the same number of calls) and samples are small.

The statistic is the sum of the smaller sample's mid-ranks; its null distribution
is the one of the sum of a random subset of that size drawn from the pooled
mid-ranks (every split of the pooled values equally likely), enumerated exactly.
Mid-ranks are doubled to stay integers, and the counts of subsets per sum are
kept as polynomials packed into Python integers, so the enumeration is a few
thousand shifts and additions of big integers. Past :data:`EXACT_LIMIT` the
normal approximation with the tie-corrected variance is used instead.
Standard library only, like :mod:`.proportions`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

__all__ = ["EXACT_LIMIT", "RankSumMethod", "RankSumTest", "doubled_midranks", "rank_sum_test"]

#: Largest work (bits shifted, roughly) spent on the exact distribution: about 75
#: trials a side, a third of a second; larger samples use the normal approximation.
EXACT_LIMIT = 4 * 10**10
#: How a p-value was computed.
RankSumMethod = Literal["exact", "normal"]

_NORMAL = NormalDist()


@dataclass(frozen=True, slots=True)
class RankSumTest:
    """A rank-sum test's outcome."""

    p_value: float
    """Two-sided p-value: the chance, under no difference, of a rank sum at least as far
    from its mean as the observed one."""
    method: RankSumMethod
    """``exact`` (the whole permutation distribution) or ``normal`` (large samples)."""


def doubled_midranks(values: Sequence[float]) -> list[int]:
    """Return twice the mid-rank (1-based) of each value, in input order.

    Tied values share the mean of the ranks they occupy; doubling keeps it an integer.
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + 1) + (end + 1)
        start = end + 1
    return ranks


def rank_sum_test(first: Sequence[float], second: Sequence[float]) -> RankSumTest:
    """Return the two-sided Wilcoxon-Mann-Whitney test of ``first`` against ``second``.

    A p-value of 1 when either sample is empty or every value is the same.

    Raises:
        ValueError: a value is not finite.
    """
    values = [*first, *second]
    if any(not math.isfinite(v) for v in values):
        raise ValueError("rank_sum_test needs finite values")
    size = min(len(first), len(second))
    if size == 0 or len(set(values)) == 1:
        return RankSumTest(1.0, "exact")
    ranks = doubled_midranks(values)
    # Test the smaller sample: |N W - m R| is the same for either one.
    chosen = ranks[: len(first)] if len(first) <= len(second) else ranks[len(first) :]
    total = sum(ranks)
    observed = abs(len(values) * sum(chosen) - size * total)
    if _exact_cost(len(values), size, max(ranks)) <= EXACT_LIMIT:
        return RankSumTest(_exact_p(ranks, size, observed), "exact")
    return RankSumTest(_normal_p(ranks, size, observed), "normal")


def _exact_cost(pooled: int, size: int, largest: int) -> int:
    width = math.comb(pooled, size).bit_length() + 8
    return pooled * size * size * largest * width


def _exact_p(ranks: Sequence[int], size: int, observed: int) -> float:
    """Share of the size-``size`` subsets whose rank sum deviates at least as much."""
    pooled, total = len(ranks), sum(ranks)
    ways = math.comb(pooled, size)
    width = (ways.bit_length() + 8) // 8  # bytes per coefficient: no carry ever crosses
    bits = width * 8
    # subsets[k] holds, at bit offset s * bits, how many k-subsets seen so far sum to s.
    subsets = [1] + [0] * size
    for seen, rank in enumerate(ranks, start=1):
        for k in range(min(seen, size), 0, -1):
            if subsets[k - 1]:
                subsets[k] += subsets[k - 1] << (rank * bits)
    packed = subsets[size].to_bytes(width * (size * max(ranks) + 1), "little")
    extreme = 0
    for s in range(len(packed) // width):
        count = int.from_bytes(packed[s * width : (s + 1) * width], "little")
        if count and abs(pooled * s - size * total) >= observed:
            extreme += count
    return min(1.0, extreme / ways)


def _normal_p(ranks: Sequence[int], size: int, observed: int) -> float:
    pooled, total = len(ranks), sum(ranks)
    centre = total / pooled
    spread = math.fsum((r - centre) ** 2 for r in ranks)
    variance = size * (pooled - size) / (pooled * (pooled - 1)) * spread
    if variance <= 0.0:
        return 1.0
    z = (observed / pooled) / math.sqrt(variance)
    return min(1.0, 2.0 * (1.0 - _NORMAL.cdf(z)))
