"""Split the trial plan into shards: round robin, or balanced by expected durations.

Every shard of a run computes the same split from the same inputs, so the split must
be a pure, deterministic function of the plan: no clock, no randomness, ties broken
by plan position and shard index. :func:`balance_by_duration` is the classic
longest-processing-time-first heuristic (LPT): trials from the longest expected
duration down each go to the shard with the least expected work so far. Its longest
shard is within 4/3 of the best possible split, where round robin can leave one
shard with several times the work of the others when durations are skewed.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["balance_by_duration", "expected_makespan", "round_robin"]


def round_robin(size: int, count: int) -> tuple[tuple[int, ...], ...]:
    """Plan positions of each of ``count`` shards: position ``p`` goes to shard ``p mod count``."""
    return tuple(tuple(range(index, size, count)) for index in range(count))


def balance_by_duration(estimates: Sequence[int], count: int) -> tuple[tuple[int, ...], ...]:
    """Plan positions of each of ``count`` shards, balanced by ``estimates`` (LPT first).

    Args:
        estimates: Expected duration (ms) of each plan position.
        count: Number of shards.

    Returns:
        One tuple of positions per shard (shard 1 first), each in plan order.
    """
    loads = [(0, index) for index in range(count)]
    owned: list[list[int]] = [[] for _ in range(count)]
    for position in sorted(range(len(estimates)), key=lambda p: (-estimates[p], p)):
        load, index = heapq.heappop(loads)
        owned[index].append(position)
        heapq.heappush(loads, (load + estimates[position], index))
    return tuple(tuple(sorted(positions)) for positions in owned)


def expected_makespan(estimates: Sequence[int], positions: Sequence[int], jobs: int) -> int:
    """Expected time (ms) for one shard to run ``positions`` with ``jobs`` trials at once.

    The engine starts trials in plan order as slots free up, so this simulates exactly
    that: each trial, in order, starts on the slot that frees first.
    """
    slots = [0] * max(1, jobs)
    for position in positions:
        start = heapq.heappop(slots)
        heapq.heappush(slots, start + estimates[position])
    return max(slots)
