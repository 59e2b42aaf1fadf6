"""Decide a comparison with a baseline at planned looks without inflating its error rates.

An adaptive run looks at HEAD's trials of a scenario after every wave and stops
the scenario once the comparison with the (fixed) baseline is decided. Looking
repeatedly and stopping on a favourable look inflates a one-look test's error
rate, so each look is judged at a stricter level: a **group-sequential design
with Bonferroni alpha-spending over the planned looks**. The looks are planned
before any trial runs (:func:`look_schedule`, from the first look to
``--max-trials``); with ``K`` planned looks, each look spends ``alpha / K``:

- the Fisher p-value is multiplied by ``K`` (and by the family size, the
  Bonferroni share across scenarios, as ``compare``'s Holm step starts with);
- the Newcombe interval is computed at confidence ``1 - alpha / K``.

By the union bound over the looks, the chance that *any* look wrongly reports a
change (or wrongly reports no change beyond the margin) is at most ``alpha``
whatever the stopping rule, so the intervals form a confidence sequence over
the planned looks. Skipped looks (a scenario that stopped early) only spend less.
See docs/statistics.md ("Adaptive runs") for the argument and the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .proportions import ComparisonVerdict, compare_proportions, verdict

__all__ = ["LOOK_GROWTH", "Look", "SequentialDesign", "assess", "look_schedule"]

#: Each planned look has at least this many times the trials of the one before.
LOOK_GROWTH = 1.5


def look_schedule(first: int, last: int) -> tuple[int, ...]:
    """Return the planned looks: trial counts from ``first`` to ``last``, growing by 1.5x.

    ``look_schedule(4, 50) == (4, 6, 9, 14, 21, 32, 48, 50)``. Geometric growth keeps
    the number of looks (and so the Bonferroni penalty) logarithmic in ``last``.

    Raises:
        ValueError: ``first`` below 1 or above ``last``.
    """
    if not 1 <= first <= last:
        raise ValueError(f"need 1 <= first <= last, got {first} and {last}")
    looks = [first]
    while looks[-1] < last:
        looks.append(min(last, max(looks[-1] + 1, math.ceil(looks[-1] * LOOK_GROWTH))))
    return tuple(looks)


@dataclass(frozen=True, slots=True)
class SequentialDesign:
    """The stopping rule's parameters, fixed before the first trial."""

    alpha: float
    """Error rate over all looks (and, for changes, over the family)."""
    margin: float
    """Largest change (0-1 scale) that counts as unchanged."""
    looks: tuple[int, ...]
    """Planned looks: HEAD trial counts at which the comparison is judged."""
    family: int = 1
    """Tests sharing ``alpha`` for changes (Bonferroni across scenarios)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be strictly between 0 and 1, got {self.alpha}")
        if not 0.0 < self.margin <= 1.0:
            raise ValueError(f"margin must be in (0, 1], got {self.margin}")
        if not self.looks or self.family < 1:
            raise ValueError("a design needs at least one look and a family of at least 1")

    @property
    def look_alpha(self) -> float:
        """Alpha spent at each look: ``alpha / K``."""
        return self.alpha / len(self.looks)

    @property
    def look_confidence(self) -> float:
        """Confidence of each look's interval: ``1 - alpha / K``."""
        return 1.0 - self.look_alpha


@dataclass(frozen=True, slots=True)
class Look:
    """The statistic at one look."""

    passed: int
    """HEAD passes so far."""
    graded: int
    """HEAD graded trials so far."""
    difference: float
    """HEAD pass rate minus BASE pass rate."""
    interval: tuple[float, float]
    """Newcombe interval of the difference at :attr:`SequentialDesign.look_confidence`."""
    p_value: float
    """Two-sided Fisher exact p-value of this look (unadjusted)."""
    adjusted_p: float
    """``p_value`` times the looks and the family size, capped at 1."""
    verdict: ComparisonVerdict
    """``compare``'s rule applied with the adjusted p-value and the look's interval."""


def assess(
    design: SequentialDesign, *, base_passed: int, base_graded: int, passed: int, graded: int
) -> Look:
    """Judge one look: BASE ``base_passed/base_graded`` against HEAD ``passed/graded``."""
    comparison = compare_proportions(
        base_passed, base_graded, passed, graded, confidence=design.look_confidence
    )
    adjusted = min(1.0, comparison.p_value * len(design.looks) * design.family)
    decided: ComparisonVerdict = (
        verdict(comparison, adjusted_p=adjusted, alpha=design.alpha, margin=design.margin)
        if base_graded and graded
        else "inconclusive"
    )
    return Look(
        passed=passed,
        graded=graded,
        difference=comparison.difference,
        interval=comparison.difference_interval,
        p_value=comparison.p_value,
        adjusted_p=adjusted,
        verdict=decided,
    )
