"""Statistics of pass/fail trials, with no knowledge of reports or runs.

:mod:`.proportions`: pass rates, Wilson intervals, exact two-sample tests, pass@k
and pass^k, multiplicity adjustments. :mod:`.planning`: the trials per side a
decision would likely need. :mod:`.ranks`: the exact rank-sum test of per-trial
counts and amounts. :mod:`.sequential`: the adaptive design's looks and
decisions; :mod:`.simulation` checks its error rates. Only :mod:`.proportions` is
re-exported here: the others load with the first comparison or adaptive run.
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
