"""Exact operating characteristics of an adaptive design: error rates, power, expected trials.

:func:`design_outcomes` enumerates every baseline and HEAD outcome of one scenario
under the rule an adaptive run applies (the same :func:`.sequential.assess` cells,
futility included); :func:`bonferroni_outcomes` does the same for the design used
before (Bonferroni over the looks), so the two can be compared figure by figure.
From those, :func:`change_error` is the worst case over the common pass rate of
deciding a change that is not there, and :func:`family_error` the chance that any
of ``m`` unchanged scenarios does. ``python -m bench sequential`` prints them.
"""

from __future__ import annotations

from .boundaries import decisions
from .exact import Cell, Outcomes, horner, path_counts, worst_case
from .futility import FUTILITY, decidable_chances
from .planning import detectable_drop
from .proportions import compare_proportions, verdict
from .sequential import SequentialDesign, boundaries

__all__ = [
    "BASELINE_CAP",
    "adaptive_detectable_drop",
    "baseline_needed",
    "bonferroni_outcomes",
    "change_error",
    "design_outcomes",
    "family_error",
    "regression_power",
]


def design_outcomes(design: SequentialDesign, baseline: int) -> Outcomes:
    """Every outcome of the adaptive rule for ``baseline`` graded baseline trials."""
    bounds = boundaries(design, baseline)
    rule = {
        "critical_p": bounds.critical_p,
        "alpha": design.alpha,
        "margin": design.margin,
        "level": 1.0 - bounds.look_confidence,
    }
    tables = [decisions(baseline, n, **rule) for n in design.looks]
    last = len(design.looks) - 1

    def cell(s0: int, k: int, x: int) -> Cell:
        found = tables[k][s0][x]
        if found != "continue" or k == last:
            return found
        chances = decidable_chances(baseline, s0, design.looks, **rule)
        return "undecidable" if chances[k][x] < FUTILITY else "continue"

    return path_counts(baseline, design.looks, cell)


def bonferroni_outcomes(design: SequentialDesign, baseline: int) -> Outcomes:
    """Every outcome of the earlier design: each look at ``alpha / K``, no futility stop.

    The Fisher p-value times the looks and the family below alpha, and the Newcombe
    interval at ``1 - alpha / K``, for changes and for unchanged.
    """
    looks = design.looks
    confidence = 1.0 - design.alpha / len(looks)

    def cell(s0: int, k: int, x: int) -> Cell:
        comparison = compare_proportions(s0, baseline, x, looks[k], confidence=confidence)
        adjusted = min(1.0, comparison.p_value * len(looks) * design.family)
        found = verdict(comparison, adjusted_p=adjusted, alpha=design.alpha, margin=design.margin)
        return "continue" if found == "inconclusive" else found

    return path_counts(baseline, looks, cell)


def change_error(outcomes: Outcomes) -> tuple[float, float]:
    """Worst case over the common pass rate of deciding a change: ``(error, rate)``."""
    polynomial = outcomes.null_polynomial(("improved", "regressed"))
    return worst_case(lambda p: horner(polynomial, p))


def family_error(per_scenario: float, scenarios: int) -> float:
    """Chance that any of ``scenarios`` independent unchanged scenarios decides a change.

    ``1 - (1 - e)^m``: with each scenario at its own worst-case rate ``e`` this is the
    worst case of the family-wise error over the scenarios' pass rates.
    """
    return 1.0 - (1.0 - per_scenario) ** scenarios


def regression_power(design: SequentialDesign, baseline: int, head_rate: float) -> float:
    """Chance of ``regressed`` when BASE always passes and HEAD passes with ``head_rate``."""
    return design_outcomes(design, baseline).chances(1.0, head_rate)["regressed"]


def adaptive_detectable_drop(
    design: SequentialDesign, baseline: int, *, power: float = 0.8
) -> int | None:
    """Smallest drop from 100% (points, steps of 5) the design detects with ``power``."""
    return detectable_drop(lambda rate: regression_power(design, baseline, rate), power=power)


#: Largest baseline :func:`baseline_needed` tries.
BASELINE_CAP = 128


def baseline_needed(
    design: SequentialDesign, *, drop: int, power: float = 0.8, start: int = 1
) -> int | None:
    """Fewest baseline trials (from ``start``) with which the design detects ``drop`` points.

    Doubles the baseline until the power is reached (or stops growing: HEAD's
    ``--max-trials`` is then the limit), then bisects. None when no baseline up to
    :data:`BASELINE_CAP` reaches it.
    """
    rate = 1.0 - drop / 100
    low, high = start, max(start, 1)
    reached, last = regression_power(design, high, rate), -1.0
    while reached < power:
        if high >= BASELINE_CAP or reached <= last + 1e-3:
            return None
        low, last = high + 1, reached
        high = min(BASELINE_CAP, high * 2)
        reached = regression_power(design, high, rate)
    while low < high:
        middle = (low + high) // 2
        if regression_power(design, middle, rate) >= power:
            high = middle
        else:
            low = middle + 1
    return high
