"""Edit-distance alignment of two step sequences (Levenshtein: insert, delete, substitute).

:func:`align` returns the rows of a minimum-cost alignment, each step of BASE and
HEAD exactly once and in order; among equally short alignments it keeps the most
steps in common, and the result is deterministic (see :func:`alignment_ops`).
:func:`edit_distance` computes the distance alone, bit-parallel (Hyyrö's form
of Myers' algorithm), for comparing many paths at once (a side's medoid path).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from ..report.behaviour import AlignedStep, AlignOp, PathStep
from .steps import step_key

__all__ = ["align", "alignment_ops", "edit_distance", "first_divergence"]

_T = TypeVar("_T")


def edit_distance(first: Sequence[Hashable], second: Sequence[Hashable]) -> int:
    """Return the Levenshtein distance between two sequences of hashable items."""
    if not first:
        return len(second)
    if not second:
        return len(first)
    masks: dict[Hashable, int] = {}
    for position, item in enumerate(first):
        masks[item] = masks.get(item, 0) | (1 << position)
    full = (1 << len(first)) - 1
    top = 1 << (len(first) - 1)
    positive, negative, score = full, 0, len(first)
    for item in second:
        equal = masks.get(item, 0)
        vertical = equal | negative
        horizontal = (((equal & positive) + positive) ^ positive) | equal
        up = negative | (~(horizontal | positive) & full)
        down = positive & horizontal
        if up & top:
            score += 1
        elif down & top:
            score -= 1
        up = ((up << 1) | 1) & full
        down = (down << 1) & full
        positive = down | (~(vertical | up) & full)
        negative = up & vertical
    return score


def alignment_ops(
    first: Sequence[_T], second: Sequence[_T], key: Callable[[_T], Hashable]
) -> list[tuple[AlignOp, int | None, int | None]]:
    """Return a minimum edit-distance alignment as ``(op, index in first, index in second)``.

    Among the alignments with the fewest edits it takes one with the fewest
    substitutions (so the most steps in common), then walks from the start
    preferring same, changed, removed, added: a common beginning stays aligned and
    a step shows as replaced only when removing it and adding another would not
    keep more steps in common.
    """
    a = [key(item) for item in first]
    b = [key(item) for item in second]
    rows, cols = len(a), len(b)
    # cost[i][j]: (edits, substitutions) between a[i:] and b[j:], packed as one integer.
    unit = max(rows, cols) + 1
    gap, swap = unit, unit + 1
    cost = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(rows + 1):
        cost[i][cols] = (rows - i) * gap
    for j in range(cols + 1):
        cost[rows][j] = (cols - j) * gap
    for i in range(rows - 1, -1, -1):
        below, here = cost[i + 1], cost[i]
        for j in range(cols - 1, -1, -1):
            here[j] = min(
                below[j + 1] + (0 if a[i] == b[j] else swap), below[j] + gap, here[j + 1] + gap
            )
    ops: list[tuple[AlignOp, int | None, int | None]] = []
    i = j = 0
    while i < rows or j < cols:
        both = i < rows and j < cols
        if both and a[i] == b[j] and cost[i][j] == cost[i + 1][j + 1]:
            ops.append(("same", i, j))
            i, j = i + 1, j + 1
        elif both and a[i] != b[j] and cost[i][j] == cost[i + 1][j + 1] + swap:
            ops.append(("changed", i, j))
            i, j = i + 1, j + 1
        elif i < rows and cost[i][j] == cost[i + 1][j] + gap:
            ops.append(("removed", i, None))
            i += 1
        else:
            ops.append(("added", None, j))
            j += 1
    return ops


def align(base: Sequence[PathStep], head: Sequence[PathStep]) -> list[AlignedStep]:
    """Align two step sequences by their keys (enclosing subagents, kind, name)."""
    return [
        AlignedStep(
            op=op,
            base=base[i] if i is not None else None,
            head=head[j] if j is not None else None,
        )
        for op, i, j in alignment_ops(base, head, step_key)
    ]


def first_divergence(rows: Sequence[AlignedStep]) -> int | None:
    """Index of the first row that is not ``same`` (``None`` when the paths are equal)."""
    return next((index for index, row in enumerate(rows) if row.op != "same"), None)
