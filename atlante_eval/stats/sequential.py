"""Decide a comparison with a fixed baseline at planned looks, at exactly the stated error rate.

An adaptive run looks at HEAD's trials of a scenario after every wave and stops the
scenario once its comparison with the (fixed) baseline is decided, or once deciding
has become improbable. Looking repeatedly inflates a one-look test's error rate, so
the design is **group-sequential and exactly calibrated** (Pocock-type: the same
thresholds at every look), for each baseline size ``n0``:

- a **change** is decided when the Fisher exact p-value is at most the critical
  p-value, chosen (:mod:`.boundaries`) so that the worst case over the common pass
  rate of deciding a change that is not there, over every look and every baseline
  and HEAD outcome, is at most ``alpha / family`` (the Bonferroni share of the
  scenario, as ``compare``'s Holm step starts with); ``compare``'s own interval must
  agree;
- **unchanged** is decided when the Newcombe interval at the look confidence lies
  within ``±margin``, the confidence chosen so that a true change of the margin is
  called unchanged with chance at most ``alpha``;
- **undecidable** (futility and curtailment, :mod:`.futility`): at a look that
  decides nothing, the scenario stops when the chance of any decision by the last
  look has fallen below 5%.

The looks are planned before any trial runs (:func:`look_schedule`). The critical
values depend only on the design and ``n0``, and are computed deterministically, so
``--resume`` reaches the same decisions. See docs/statistics.md ("Adaptive runs").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .boundaries import calibrate, decisions
from .futility import FUTILITY, decidable_chances
from .proportions import ComparisonVerdict, fisher_exact_two_sided, newcombe_difference_interval

__all__ = [
    "LOOK_GROWTH",
    "METHOD",
    "Boundaries",
    "Look",
    "LookStop",
    "SequentialDesign",
    "assess",
    "boundaries",
    "judge_look",
    "look_schedule",
    "undecided_look",
]

#: Each planned look has at least this many times the trials of the one before.
LOOK_GROWTH = 1.5
#: The design's name in the decision record.
METHOD: Literal["exact-pocock"] = "exact-pocock"

LookStop = Literal["decided", "undecidable"]


def look_schedule(first: int, last: int) -> tuple[int, ...]:
    """Return the planned looks: trial counts from ``first`` to ``last``, growing by 1.5x.

    ``look_schedule(4, 50) == (4, 6, 9, 14, 21, 32, 48, 50)``. Geometric growth keeps
    the number of looks logarithmic in ``last``.

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
        if any(b <= a for a, b in zip(self.looks, self.looks[1:], strict=False)) or (
            self.looks[0] < 1
        ):
            raise ValueError(f"looks must be increasing counts from 1, got {self.looks}")

    @property
    def share(self) -> float:
        """Each scenario's budget for a wrong change: ``alpha / family``."""
        return self.alpha / self.family


@dataclass(frozen=True, slots=True)
class Boundaries:
    """The design calibrated for one baseline size."""

    baseline: int
    """Baseline graded trials ``n0``."""
    critical_p: float
    """A change needs a Fisher p-value at most this (0.0: no change can be decided)."""
    look_confidence: float
    """Unchanged needs the Newcombe interval at this confidence within the margin."""
    change_error: float
    """Exact worst case over the common pass rate of a wrong change (at most ``share``)."""
    unchanged_error: float
    """Exact worst case of deciding unchanged when the true change is the margin."""


def boundaries(design: SequentialDesign, baseline: int) -> Boundaries:
    """Calibrate ``design`` for ``baseline`` graded baseline trials (cached per process)."""
    if baseline < 1:
        raise ValueError(f"a baseline needs at least one graded trial, got {baseline}")
    found = calibrate(
        baseline, design.looks, share=design.share, alpha=design.alpha, margin=design.margin
    )
    return Boundaries(
        baseline=baseline,
        critical_p=found.critical_p,
        look_confidence=1.0 - found.unchanged_level,
        change_error=found.change_error,
        unchanged_error=found.unchanged_error,
    )


@dataclass(frozen=True, slots=True)
class Look:
    """The statistic at one look, and what the design does there."""

    passed: int
    """HEAD passes so far."""
    graded: int
    """HEAD graded trials so far."""
    difference: float
    """HEAD pass rate minus BASE pass rate."""
    interval: tuple[float, float]
    """Newcombe interval of the difference at the look confidence."""
    p_value: float
    """Two-sided Fisher exact p-value of this look (unadjusted)."""
    adjusted_p: float
    """``p_value * alpha / critical_p``, capped at 1: a change needs it at most alpha."""
    verdict: ComparisonVerdict
    """The decision at this look (``inconclusive``: none)."""
    stop: LookStop | None
    """``decided``, ``undecidable`` (futility), or None: the scenario goes on."""
    decidable: float | None
    """Chance of a decision at a later look (None when decided or at the last look)."""


def undecided_look(passed: int, graded: int, base: tuple[int, int]) -> Look:
    """The look of a comparison with no graded trial on a side: nothing can be judged."""
    difference = (passed / graded if graded else 0.0) - (base[0] / base[1] if base[1] else 0.0)
    return Look(passed, graded, difference, (-1.0, 1.0), 1.0, 1.0, "inconclusive", None, None)


def judge_look(
    design: SequentialDesign,
    *,
    base: tuple[int, int],
    head: tuple[int, int],
    critical_p: float,
    level: float,
    look_confidence: float,
    look: int | None,
    decidable: Callable[[int], float],
) -> Look:
    """Judge one look under calibrated thresholds: BASE ``base`` against HEAD ``head``
    (passed, graded; both graded at least once).

    ``level`` is the unchanged rule's level and ``look_confidence`` the intervals'
    confidence (``1 - level``), each as the calibration that chose them computed it.

    ``decidable(k)`` is the chance of a decision after planned look ``k``, asked only
    before the last look when this one decides nothing (futility).
    """
    (base_passed, base_graded), (passed, graded) = base, head
    cell = decisions(
        base_graded,
        graded,
        critical_p=critical_p,
        alpha=design.alpha,
        margin=design.margin,
        level=level,
    )[base_passed][passed]
    p_value = fisher_exact_two_sided(base_passed, base_graded, passed, graded)
    interval = (
        newcombe_difference_interval(
            base_passed, base_graded, passed, graded, confidence=look_confidence
        )
        if level > 0.0
        else (-1.0, 1.0)
    )
    verdict: ComparisonVerdict = "inconclusive" if cell == "continue" else cell  # type: ignore[assignment]
    index = design.looks.index(look) if look in design.looks else len(design.looks) - 1
    chance: float | None = None
    stop: LookStop | None = "decided" if cell != "continue" else None
    if stop is None and index < len(design.looks) - 1:
        chance = decidable(index)
        stop = "undecidable" if chance < FUTILITY else None
    return Look(
        passed=passed,
        graded=graded,
        difference=passed / graded - base_passed / base_graded,
        interval=interval,
        p_value=p_value,
        adjusted_p=min(1.0, p_value * design.alpha / critical_p) if critical_p > 0.0 else 1.0,
        verdict=verdict,
        stop=stop,
        decidable=chance,
    )


def assess(
    design: SequentialDesign,
    *,
    base_passed: int,
    base_graded: int,
    passed: int,
    graded: int,
    look: int | None = None,
) -> Look:
    """Judge one look: BASE ``base_passed/base_graded`` against HEAD ``passed/graded``.

    ``look`` is the planned look this is (the wave's target trials; default the last):
    futility applies before the last look. Fewer graded trials than planned
    (infra-errors) are judged as they are, the later looks shifted by the shortfall.
    """
    if not base_graded or not graded:
        return undecided_look(passed, graded, (base_passed, base_graded))
    bounds = boundaries(design, base_graded)
    level = 1.0 - bounds.look_confidence
    rule = {
        "critical_p": bounds.critical_p,
        "alpha": design.alpha,
        "margin": design.margin,
        "level": level,
    }
    return judge_look(
        design,
        base=(base_passed, base_graded),
        head=(passed, graded),
        critical_p=bounds.critical_p,
        level=level,
        look_confidence=bounds.look_confidence,
        look=look,
        decidable=lambda k: _decidable(
            design, rule, base=(base_passed, base_graded), x=passed, n=graded, k=k
        ),
    )


def _decidable(
    design: SequentialDesign,
    rule: dict[str, float],
    *,
    base: tuple[int, int],
    x: int,
    n: int,
    k: int,
) -> float:
    """Chance of a later decision from HEAD ``x/n`` at look ``k`` (shifted looks if short)."""
    shortfall = design.looks[k] - n
    looks = (
        design.looks
        if shortfall == 0
        else (n, *(later - shortfall for later in design.looks[k + 1 :]))
    )
    row = 0 if shortfall else k
    return decidable_chances(base[1], base[0], looks, **rule)[row][x]
