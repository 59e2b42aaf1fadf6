"""Futility: stop a scenario once a decision within the remaining looks has become improbable.

At a look that decides nothing, the chance of deciding at a later look is computed
for HEAD's pass rate as it is known so far: a uniform prior updated by HEAD's passes
and failures, so the next trials are predicted by the beta-binomial (a Pólya urn:
after ``x`` passes in ``n``, the next trial passes with chance ``(x + 1) / (n + 2)``).
The baseline is what was observed. Future looks are judged by the design's own
rule, including later futility stops, by backward induction over every outcome.
When that chance is below :data:`FUTILITY` the scenario stops as
``undecidable within N trials``; when no outcome of the remaining trials could
decide anything, the chance is exactly 0 and the stop is plain curtailment.

The probabilities are exact ratios of integers (the prior is uniform), so the same
counts always give the same stop, on every machine: ``--resume`` repeats it.
Stopping for futility never decides a change, so it only lowers the error rates.
"""

from __future__ import annotations

import math
from functools import lru_cache

from .boundaries import decisions

__all__ = ["FUTILITY", "decidable_chances", "predictive"]

#: Stop when the chance of any decision by the last look is below this.
FUTILITY = 0.05


@lru_cache(maxsize=8192)
def predictive(passed: int, graded: int, more: int) -> tuple[float, ...]:
    """Chance of ``j`` passes in ``more`` further trials after ``passed`` of ``graded``.

    The beta-binomial with a uniform prior:
    ``C(more, j) (x+1)_j (n-x+1)_(more-j) / (n+2)_more`` with rising factorials ``(a)_j``,
    computed as a ratio of integers.
    """
    failed = graded - passed
    denominator = _rising(graded + 2, more)
    return tuple(
        math.comb(more, j) * _rising(passed + 1, j) * _rising(failed + 1, more - j) / denominator
        for j in range(more + 1)
    )


def _rising(start: int, count: int) -> int:
    """``start * (start + 1) * ... * (start + count - 1)``."""
    return math.prod(range(start, start + count))


@lru_cache(maxsize=4096)
def decidable_chances(
    n0: int,
    s0: int,
    looks: tuple[int, ...],
    *,
    critical_p: float,
    alpha: float,
    margin: float,
    level: float,
) -> tuple[tuple[float, ...], ...]:
    """For each look ``k`` and HEAD passes ``x``: the chance of a decision at a later look.

    ``looks`` are HEAD graded counts (the first may be an off-schedule look, when
    infra-errors left fewer graded trials than planned). A later look whose state is
    undecided and itself below :data:`FUTILITY` counts as no decision (the scenario
    would stop there); the last look's value is 0 (nothing follows it).
    """
    rule = {"critical_p": critical_p, "alpha": alpha, "margin": margin, "level": level}
    chances: list[tuple[float, ...]] = [(0.0,) * (looks[-1] + 1)]
    for k in range(len(looks) - 2, -1, -1):
        n, following = looks[k], looks[k + 1]
        cells = decisions(n0, following, **rule)[s0]
        later = chances[0]
        last = k + 1 == len(looks) - 1
        worth = [
            1.0 if cells[y] != "continue" else 0.0 if last or later[y] < FUTILITY else later[y]
            for y in range(following + 1)
        ]
        row = []
        for x in range(n + 1):
            step = predictive(x, n, following - n)
            row.append(math.fsum(chance * worth[x + j] for j, chance in enumerate(step)))
        chances.insert(0, tuple(row))
    return tuple(chances)
