"""The stratified overall row: exact stratified test, weighted rates, MOVER intervals."""

from __future__ import annotations

import itertools
import math

import pytest

from atlante_eval.stats.proportions import fisher_exact_two_sided, newcombe_difference_interval
from atlante_eval.stats.stratified import Stratum, stratified_comparison, stratified_exact_test


def test_one_stratum_is_fisher_and_newcombe() -> None:
    """With one scenario the test is Fisher's and the interval Newcombe's."""
    for s1, n1, s2, n2 in ((2, 20, 18, 20), (3, 3, 0, 3), (7, 12, 4, 9), (0, 5, 0, 5)):
        found = stratified_comparison([Stratum(s1, n1, s2, n2)])
        assert found.p_value == pytest.approx(fisher_exact_two_sided(s1, n1, s2, n2), rel=1e-9)
        expected = newcombe_difference_interval(s1, n1, s2, n2)
        assert found.difference_interval == pytest.approx(expected, abs=1e-12)
        assert found.difference == pytest.approx(s2 / n2 - s1 / n1)


def _brute_force(strata: list[Stratum]) -> float:
    """Enumerate every table set with the observed margins; sum those as likely or less."""
    ranges = []
    for s in strata:
        total = s.s1 + s.s2
        ranges.append(range(max(0, total - s.n1), min(s.n2, total) + 1))
    chances: dict[int, float] = {}
    for heads in itertools.product(*ranges):
        chance = 1.0
        for s, y in zip(strata, heads, strict=True):
            total = s.s1 + s.s2
            chance *= (
                math.comb(s.n2, y) * math.comb(s.n1, total - y) / math.comb(s.n1 + s.n2, total)
            )
        chances[sum(heads)] = chances.get(sum(heads), 0.0) + chance
    observed = chances[sum(s.s2 for s in strata)]
    return sum(c for c in chances.values() if c <= observed * (1 + 1e-7))


def test_the_exact_test_matches_brute_force_enumeration() -> None:
    """The convolution of hypergeometrics equals enumerating every table set."""
    cases = [
        [Stratum(8, 10, 5, 10), Stratum(3, 6, 1, 7)],
        [Stratum(4, 5, 1, 6), Stratum(2, 9, 2, 3), Stratum(0, 4, 3, 4)],
        [Stratum(10, 10, 9, 10), Stratum(1, 2, 0, 8)],
    ]
    for strata in cases:
        assert stratified_exact_test(strata) == pytest.approx(_brute_force(strata), rel=1e-9)


def test_degenerate_strata_carry_no_evidence() -> None:
    """Scenarios that always (or never) pass on both sides leave the test at 1."""
    assert stratified_exact_test([Stratum(20, 20, 4, 4), Stratum(0, 4, 0, 20)]) == 1.0


def test_merged_baseline_is_no_change_when_stratified() -> None:
    """BASE a=20/20, b=0/4 vs HEAD a=4/4, b=0/20: pooled 20/24 -> 4/24, stratified: nothing."""
    strata = [Stratum(20, 20, 4, 4), Stratum(0, 4, 0, 20)]
    found = stratified_comparison(strata)
    assert found.difference == pytest.approx(0.0)
    assert found.rate1 == pytest.approx(0.5)
    assert found.rate2 == pytest.approx(0.5)
    assert found.p_value == 1.0
    low, high = found.difference_interval
    assert low < 0.0 < high
    # The pooled counts the stratified row replaces show a large, significant drop.
    assert fisher_exact_two_sided(20, 24, 4, 24) < 1e-4


def test_equal_counts_weigh_scenarios_equally() -> None:
    """With the same trials everywhere, the weighted rates are the scenarios' mean rates."""
    found = stratified_comparison([Stratum(8, 10, 5, 10), Stratum(2, 10, 4, 10)])
    assert found.rate1 == pytest.approx(0.5)
    assert found.rate2 == pytest.approx(0.45)
    assert found.strata == 2


def test_a_consistent_drop_over_scenarios_is_significant() -> None:
    """Five 8/10 -> 5/10 drops: each inconclusive alone, clear together."""
    found = stratified_comparison([Stratum(8, 10, 5, 10)] * 5)
    assert found.p_value < 0.01
    assert found.difference_interval[1] < 0.0
    assert fisher_exact_two_sided(8, 10, 5, 10) > 0.05


def test_no_scenario_with_trials_on_both_sides() -> None:
    """Scenarios missing graded trials on a side are left out; none left: no evidence."""
    found = stratified_comparison([Stratum(0, 0, 3, 3)])
    assert (found.strata, found.p_value, found.difference_interval) == (0, 1.0, (-1.0, 1.0))
