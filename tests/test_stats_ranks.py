"""The rank-sum test: exact p-values equal full enumeration (ties too); big samples approximate."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atlante_eval.stats import ranks
from atlante_eval.stats.proportions import fisher_exact_two_sided
from atlante_eval.stats.ranks import doubled_midranks, rank_sum_test


def _enumerated(first: list[int], second: list[int]) -> float:
    """The two-sided p-value by listing every split of the pooled values."""
    pooled = first + second
    scores = doubled_midranks(pooled)
    total, size = sum(scores), len(first)
    observed = abs(len(pooled) * sum(scores[:size]) - size * total)
    extreme = splits = 0
    for chosen in itertools.combinations(range(len(pooled)), size):
        splits += 1
        extreme += abs(len(pooled) * sum(scores[i] for i in chosen) - size * total) >= observed
    return extreme / splits


def test_midranks_share_the_mean_rank_of_a_tie() -> None:
    """Tied values get the mean of the ranks they occupy (doubled: integers)."""
    assert doubled_midranks([5, 1, 5, 3, 5]) == [8, 2, 8, 4, 8]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=6),
    st.lists(st.integers(0, 4), min_size=1, max_size=6),
)
def test_exact_p_equals_enumeration(first: list[int], second: list[int]) -> None:
    """The packed-polynomial distribution gives exactly the enumerated p-value."""
    expected = 1.0 if len(set(first + second)) == 1 else _enumerated(first, second)
    test = rank_sum_test(first, second)
    assert test.method == "exact"
    assert test.p_value == pytest.approx(expected, abs=1e-12)


def test_complete_separation_of_six_and_six() -> None:
    """2 calls in every BASE trial against 7-8 in every HEAD trial: p = 2 / C(12, 6)."""
    test = rank_sum_test([2] * 6, [7, 8, 7, 8, 7, 8])
    assert test.p_value == pytest.approx(2 / math.comb(12, 6))


def test_zero_one_counts_test_the_share_of_trials() -> None:
    """On 0/1 counts the permutation test is the hypergeometric one (here Fisher's value)."""
    p = rank_sum_test([1] * 6, [1, 0, 0, 0, 0, 0]).p_value
    assert p == pytest.approx(fisher_exact_two_sided(6, 6, 1, 6))


@pytest.mark.parametrize(
    ("first", "second"),
    [([], [1, 2]), ([3, 3], [3, 3, 3]), ([0], [])],
    ids=["empty", "all-equal", "other-empty"],
)
def test_nothing_to_compare_is_p_one(first: list[int], second: list[int]) -> None:
    """No sample, or every value the same, gives 1."""
    assert rank_sum_test(first, second).p_value == 1.0


def test_non_finite_values_are_refused() -> None:
    """NaN has no rank."""
    with pytest.raises(ValueError, match="finite"):
        rank_sum_test([1.0, math.nan], [2.0])


def test_large_samples_use_the_normal_approximation_close_to_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the work limit the normal approximation is used; it stays near the exact value."""
    first = [i % 7 for i in range(40)]
    second = [(i * 3) % 9 for i in range(40)]
    exact = rank_sum_test(first, second)
    assert exact.method == "exact"
    monkeypatch.setattr(ranks, "EXACT_LIMIT", 0)
    normal = rank_sum_test(first, second)
    assert normal.method == "normal"
    assert normal.p_value == pytest.approx(exact.p_value, abs=0.01)


def test_the_samples_can_be_swapped() -> None:
    """Which side comes first does not change the two-sided p-value."""
    first, second = [0, 1, 1, 4, 9], [2, 2, 3, 5, 8, 8, 11]
    assert rank_sum_test(first, second).p_value == rank_sum_test(second, first).p_value
