"""Statistics of pass/fail trials, with no knowledge of reports or runs.

:mod:`.proportions`: pass rates, Wilson intervals, exact two-sample tests, pass@k
and pass^k, multiplicity adjustments. :mod:`.stratified`: the overall row across
scenarios; :mod:`.planning`: trials needed at the real target power;
:mod:`.ranks`: the exact rank-sum test of per-trial counts and amounts.
:mod:`.sequential`: the adaptive design's looks and decisions, calibrated exactly
by :mod:`.boundaries` over every outcome (:mod:`.exact`), with futility stops
(:mod:`.futility`); :mod:`.operating` computes its error rates, power and
expected trials exactly, and :mod:`.simulation` replays it. :mod:`.two_sample`
calibrates the same rule for arms, whose control grows with them. Only
:mod:`.proportions` is re-exported here: the rest loads with ``compare`` or the
first adaptive run.
"""

from __future__ import annotations

from .proportions import (
    ComparisonVerdict,
    ProportionComparison,
    ScenarioStats,
    benjamini_hochberg_adjust,
    compare_proportions,
    holm_adjust,
    newcombe_difference_interval,
    scenario_statistics,
    trials_needed,
    verdict,
    wilson_interval,
)

__all__ = [
    "ComparisonVerdict",
    "ProportionComparison",
    "ScenarioStats",
    "benjamini_hochberg_adjust",
    "compare_proportions",
    "holm_adjust",
    "newcombe_difference_interval",
    "scenario_statistics",
    "trials_needed",
    "verdict",
    "wilson_interval",
]
