"""Tests for atlante_eval.stats.proportions, pinned to published values from the literature.

Sources of the hard-coded numbers:
- Wilson: Newcombe (1998a), Stat Med 17:857-872, Table I, method 3 (score, no correction).
- Newcombe difference: Newcombe (1998b), Stat Med 17:873-890, Table II, method 10; the
  same figures are reproduced in the WUSS 2016 paper used by R DescTools' BinomDiffCI tests.
- Fisher: Fisher's tea-tasting experiment (34/70), and R ``fisher.test`` outputs recorded
  in scipy's ``TestFisherExact`` suite.
- Sample size: R's ``power.prop.test`` documentation example (n = 76.7).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atlante_eval.stats import (
    ProportionComparison,
    benjamini_hochberg_adjust,
    compare_proportions,
    holm_adjust,
    newcombe_difference_interval,
    scenario_statistics,
    trials_needed,
    verdict,
    wilson_interval,
)
from atlante_eval.stats import proportions as stats
from atlante_eval.stats.proportions import (
    fisher_exact_two_sided,
    mean,
    p95_nearest_rank,
    pass_at_k,
    pass_at_k_all,
    pass_hat_k,
    pass_hat_k_all,
    percentile_nearest_rank,
    stability,
)


@st.composite
def counts(draw: st.DrawFn, max_n: int = 200) -> tuple[int, int]:
    """Draw ``(successes, n)`` with ``0 <= successes <= n``."""
    n = draw(st.integers(0, max_n))
    return draw(st.integers(0, n)), n


@st.composite
def counts_with_k(draw: st.DrawFn) -> tuple[int, int, int]:
    """Draw ``(n, c, k)`` with ``0 <= c <= n`` and ``1 <= k < n``."""
    n = draw(st.integers(2, 80))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n - 1))


pvalue_lists = st.lists(st.floats(0.0, 1.0, allow_nan=False), max_size=30)


# --------------------------------------------------------------------------- surface


def test_all_lists_exactly_the_public_names() -> None:
    """Every name in __all__ exists and every public module-level name is listed."""
    public = {
        name
        for name, value in vars(stats).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == stats.__name__
    }
    assert set(stats.__all__) == public | {"Stability", "ComparisonVerdict"}
    assert all(hasattr(stats, name) for name in stats.__all__)


# --------------------------------------------------------------------------- mean, percentiles


def test_mean_of_empty_is_zero() -> None:
    """The mean of no values is 0.0, not an error."""
    assert mean([]) == 0.0


def test_mean_is_the_arithmetic_mean() -> None:
    """The mean adds exactly (fsum) before dividing."""
    assert mean([1, 2, 3, 4]) == 2.5
    assert mean([0.1] * 10) == 0.1


def test_p95_of_empty_is_zero() -> None:
    """The p95 of no values is 0, as the reference report writes it."""
    assert p95_nearest_rank([]) == 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [([5], 5), (list(range(1, 21)), 19), (list(range(1, 101)), 95), ([30, 10, 20], 30)],
)
def test_p95_is_the_reference_nearest_rank(values: list[int], expected: int) -> None:
    """p95 is the sorted value at index max(0, ceil(0.95 n) - 1)."""
    assert p95_nearest_rank(values) == expected


def test_p95_keeps_the_element_type() -> None:
    """Integer samples give an integer p95 and float samples a float one."""
    assert isinstance(p95_nearest_rank([1, 2, 3]), int)
    assert p95_nearest_rank([0.5, 0.25]) == 0.5


def test_percentile_extremes_are_min_and_max() -> None:
    """q = 0 gives the smallest value and q = 1 the largest."""
    values = [7, 3, 9, 1]
    assert percentile_nearest_rank(values, 0.0) == 1
    assert percentile_nearest_rank(values, 1.0) == 9
    assert percentile_nearest_rank(values, 0.5) == 3


@pytest.mark.parametrize("q", [-0.1, 1.5])
def test_percentile_rejects_a_quantile_outside_0_1(q: float) -> None:
    """A quantile outside [0, 1] is a ValueError."""
    with pytest.raises(ValueError, match="quantile"):
        percentile_nearest_rank([1, 2], q)


# --------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    ("successes", "n", "lower", "upper"),
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombe_1998a_table_i(
    successes: int, n: int, lower: float, upper: float
) -> None:
    """The Wilson interval reproduces Newcombe's published score intervals to 4 decimals."""
    got = wilson_interval(successes, n)
    assert got == pytest.approx((lower, upper), abs=5e-5)


def test_wilson_zero_and_all_successes_are_exact_at_the_edge() -> None:
    """0/10 gives exactly 0 to 0.2775 (Newcombe 1998b) and 10/10 its mirror, 0.7225 to exactly 1."""
    zero_lower, zero_upper = wilson_interval(0, 10)
    full_lower, full_upper = wilson_interval(10, 10)
    assert zero_lower == 0.0
    assert zero_upper == pytest.approx(0.2775, abs=5e-5)
    assert full_lower == pytest.approx(0.7225, abs=5e-5)
    assert full_upper == 1.0


def test_wilson_without_trials_is_uninformative() -> None:
    """n = 0 gives the whole unit interval."""
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_widens_with_confidence() -> None:
    """A 99% interval contains the 95% one."""
    low95, high95 = wilson_interval(7, 20)
    low99, high99 = wilson_interval(7, 20, confidence=0.99)
    assert low99 < low95
    assert high95 < high99


@pytest.mark.parametrize(
    ("successes", "n", "confidence"), [(3, 2, 0.95), (-1, 2, 0.95), (1, 2, 1.0)]
)
def test_wilson_rejects_bad_arguments(successes: int, n: int, confidence: float) -> None:
    """Impossible counts and a confidence outside (0, 1) are ValueErrors."""
    with pytest.raises(ValueError, match=r"successes|confidence"):
        wilson_interval(successes, n, confidence=confidence)


@given(counts(), st.floats(0.5, 0.999))
def test_wilson_contains_the_rate_and_stays_in_unit_interval(
    count: tuple[int, int], confidence: float
) -> None:
    """The interval lies in [0, 1] and contains the observed rate."""
    successes, n = count
    lower, upper = wilson_interval(successes, n, confidence=confidence)
    rate = successes / n if n else 0.5
    assert 0.0 <= lower <= rate <= upper <= 1.0


# --------------------------------------------------------------------------- pass@k, pass^k


def test_pass_at_k_hand_example() -> None:
    """With 2 passes in 5 trials, pass@2 = 1 - C(3,2)/C(5,2) = 0.7 and pass^2 = 1/10."""
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7, abs=1e-15)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1, abs=1e-15)


@given(counts(max_n=80).filter(lambda count: count[1] > 0))
def test_k_equal_1_is_the_plain_rate(count: tuple[int, int]) -> None:
    """pass@1 and pass^1 both equal c / n."""
    c, n = count
    assert pass_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-12)
    assert pass_hat_k(n, c, 1) == pytest.approx(c / n, abs=1e-12)


@pytest.mark.parametrize(("n", "c"), [(4, 0), (4, 1), (4, 3), (4, 4)])
def test_k_equal_n_is_any_or_all(n: int, c: int) -> None:
    """pass@n is 1 when any trial passed and pass^n is 1 only when all did."""
    assert pass_at_k(n, c, n) == (1.0 if c else 0.0)
    assert pass_hat_k(n, c, n) == (1.0 if c == n else 0.0)


def test_pass_at_k_is_exact_for_large_n() -> None:
    """At n = 200, pass@k with one pass is k/n and pass^k with one failure is (n-k)/n."""
    assert pass_at_k(200, 1, 50) == pytest.approx(0.25, abs=1e-15)
    assert pass_hat_k(200, 199, 50) == pytest.approx(0.75, abs=1e-15)
    assert 0.0 < pass_hat_k(200, 100, 100) < 1e-58


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, 2, 0), (5, 2, 6), (0, 0, 1)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    """c must be in 0..n and k in 1..n."""
    with pytest.raises(ValueError, match="need"):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match="need"):
        pass_hat_k(n, c, k)


@given(counts_with_k())
def test_pass_at_k_grows_and_pass_hat_k_shrinks_with_k(args: tuple[int, int, int]) -> None:
    """pass@k is nondecreasing and pass^k nonincreasing in k, both within [0, 1]."""
    n, c, k = args
    assert 0.0 <= pass_at_k(n, c, k) <= pass_at_k(n, c, k + 1) <= 1.0
    assert 1.0 >= pass_hat_k(n, c, k) >= pass_hat_k(n, c, k + 1) >= 0.0


@given(counts(max_n=120).filter(lambda count: count[1] > 0))
def test_every_k_at_once_equals_the_exact_values(count: tuple[int, int]) -> None:
    """The linear-time curves agree with the exact integer formula at every k."""
    c, n = count
    at, hat = pass_at_k_all(n, c), pass_hat_k_all(n, c)
    assert len(at) == len(hat) == n
    for k in range(1, n + 1):
        assert at[k - 1] == pytest.approx(pass_at_k(n, c, k), rel=1e-12, abs=1e-300)
        assert hat[k - 1] == pytest.approx(pass_hat_k(n, c, k), rel=1e-12, abs=1e-300)
    assert at[-1] == (1.0 if c else 0.0)
    assert hat[-1] == (1.0 if c == n else 0.0)


def test_every_k_of_20000_trials_stays_exact_where_sampled() -> None:
    """At 20,000 trials (where exact integers for every k would not finish), sampled k agree."""
    n = 20_000
    for c in (1, 10_000, 19_990):
        at, hat = pass_at_k_all(n, c), pass_hat_k_all(n, c)
        for k in (1, 2, 7, 50, 500):
            assert at[k - 1] == pytest.approx(pass_at_k(n, c, k), rel=1e-10)
            assert hat[k - 1] == pytest.approx(pass_hat_k(n, c, k), rel=1e-10, abs=1e-300)
    assert pass_at_k_all(n, 1)[n // 4 - 1] == pytest.approx(0.25, rel=1e-10)  # k/n with one pass
    assert pass_hat_k_all(n, n - 1)[n // 4 - 1] == pytest.approx(0.75, rel=1e-10)


def test_scenario_statistics_of_20000_trials_cover_every_k() -> None:
    """scenario_statistics lists pass@k and pass^k for k = 1..graded, whatever the count."""
    verdicts = ["pass"] * 12_000 + ["fail"] * 8_000
    zeros = [0] * len(verdicts)
    found = scenario_statistics(verdicts, durations=zeros, tokens=[None] * 20_000, costs=zeros)
    assert sorted(found.pass_at_k) == list(range(1, 20_001))
    assert found.pass_at_k[1] == pytest.approx(0.6)
    assert found.pass_hat_k[1] == pytest.approx(0.6)
    assert found.pass_at_k[20_000] == 1.0
    assert found.pass_hat_k[20_000] == 0.0
    assert found.pass_hat_k[3] == pytest.approx(pass_hat_k(20_000, 12_000, 3), rel=1e-12)


# --------------------------------------------------------------------------- stability


@pytest.mark.parametrize(
    ("passes", "n", "expected"),
    [
        (0, 0, None),
        (3, 3, "stable-pass"),
        (0, 3, "stable-fail"),
        (2, 3, "flaky"),
        (1, 1, "stable-pass"),
    ],
)
def test_stability_classes(passes: int, n: int, expected: str | None) -> None:
    """All passes is stable-pass, none is stable-fail, a mix is flaky, no trials is None."""
    assert stability(passes, n) == expected


# --------------------------------------------------------------------------- Newcombe


@pytest.mark.parametrize(
    ("head", "base", "lower", "upper"),
    [
        ((56, 70), (48, 80), 0.0524, 0.3339),
        ((9, 10), (3, 10), 0.1705, 0.8090),
        ((10, 10), (0, 20), 0.6791, 1.0),
        ((84, 101), (89, 105), -0.1177, 0.0851),
    ],
)
def test_newcombe_matches_newcombe_1998b_table_ii(
    head: tuple[int, int], base: tuple[int, int], lower: float, upper: float
) -> None:
    """Method 10 reproduces the paper's intervals for p_head - p_base to 4 decimals."""
    got = newcombe_difference_interval(*base, *head)
    assert got == pytest.approx((lower, upper), abs=5e-5)


def test_newcombe_swapping_sides_negates_the_interval() -> None:
    """BASE and HEAD swapped give the mirror image interval."""
    lower, upper = newcombe_difference_interval(9, 12, 20, 138)
    assert newcombe_difference_interval(20, 138, 9, 12) == pytest.approx((-upper, -lower))


@pytest.mark.parametrize(("s1", "n1", "s2", "n2"), [(0, 0, 3, 5), (3, 5, 0, 0), (0, 0, 0, 0)])
def test_newcombe_without_trials_on_a_side_is_uninformative(
    s1: int, n1: int, s2: int, n2: int
) -> None:
    """A side with no trials gives the whole range (-1, 1)."""
    assert newcombe_difference_interval(s1, n1, s2, n2) == (-1.0, 1.0)


@given(counts(), counts(), st.floats(0.5, 0.999))
def test_newcombe_contains_the_difference(
    base: tuple[int, int], head: tuple[int, int], confidence: float
) -> None:
    """The interval lies in [-1, 1] and contains the observed difference."""
    lower, upper = newcombe_difference_interval(*base, *head, confidence=confidence)
    if base[1] and head[1]:
        difference = head[0] / head[1] - base[0] / base[1]
        assert -1.0 <= lower <= difference <= upper <= 1.0
    else:
        assert (lower, upper) == (-1.0, 1.0)


# --------------------------------------------------------------------------- Fisher


def test_fisher_tea_tasting() -> None:
    """Fisher's lady tasting tea, 3 of 4 right each way, has two-sided p = 34/70 = 0.4857."""
    assert fisher_exact_two_sided(3, 4, 1, 4) == pytest.approx(34 / 70, rel=1e-12)
    assert round(fisher_exact_two_sided(3, 4, 1, 4), 4) == 0.4857


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ([[100, 2], [1000, 5]], 1.300759363430016e-01),
        ([[2, 7], [8, 2]], 2.301413756522114e-02),
        ([[5, 1], [10, 10]], 1.973244147157190e-01),
        ([[5, 15], [20, 20]], 9.580440012477637e-02),
        ([[5, 16], [20, 25]], 1.725864953812994e-01),
        ([[10, 5], [10, 0]], 6.126482213438734e-02),
        ([[5, 0], [1, 4]], 4.761904761904762e-02),
        ([[0, 1], [3, 2]], 1.0),
        ([[6, 37], [108, 200]], 0.005092697748126),
        ([[22, 0], [0, 102]], 7.175066786244549e-25),
        ([[94, 48], [3577, 16988]], 2.069356340993818e-37),
    ],
)
def test_fisher_matches_r_fisher_test(table: list[list[int]], expected: float) -> None:
    """The p-value matches R's fisher.test, also for tables of hundreds or thousands of trials."""
    (a, b), (c, d) = table
    assert fisher_exact_two_sided(a, a + b, c, c + d) == pytest.approx(expected, rel=1e-9)


@given(counts(max_n=300), counts(max_n=300))
def test_fisher_for_large_tables_matches_exact_integers(
    base: tuple[int, int], head: tuple[int, int]
) -> None:
    """The linear-time path (used beyond 1,000 trials) gives the exact integers' p-value."""
    exact = fisher_exact_two_sided(base[0], base[1], head[0], head[1])
    original = stats._FISHER_EXACT_TRIALS
    stats._FISHER_EXACT_TRIALS = 0  # force the floating-point path on a small table
    try:
        linear = fisher_exact_two_sided(base[0], base[1], head[0], head[1])
    finally:
        stats._FISHER_EXACT_TRIALS = original
    assert linear == pytest.approx(exact, rel=1e-9, abs=1e-300)


def test_fisher_of_20000_trials_a_side_matches_exact_integers_where_affordable() -> None:
    """20,000 trials against 20 (exact integers sum only 21 tables) and the mirrored table."""
    k = 12_000 + 3
    weights = {x: math.comb(20_000, x) * math.comb(20, k - x) for x in range(k - 20, k + 1)}
    observed = weights[12_000]
    tail = sum(w for w in weights.values() if w * 10**7 <= observed * (10**7 + 1))
    expected = tail / math.comb(20_020, k)
    assert fisher_exact_two_sided(12_000, 20_000, 3, 20) == pytest.approx(expected, rel=1e-9)
    assert fisher_exact_two_sided(3, 20, 12_000, 20_000) == pytest.approx(expected, rel=1e-9)
    assert 0.0 < fisher_exact_two_sided(12_000, 20_000, 11_000, 20_000) < 1e-20


def test_fisher_is_symmetric_in_the_two_sides() -> None:
    """Swapping BASE and HEAD does not change the two-sided p-value."""
    assert fisher_exact_two_sided(6, 43, 108, 308) == fisher_exact_two_sided(108, 308, 6, 43)


@pytest.mark.parametrize(
    ("s1", "n1", "s2", "n2"), [(0, 0, 3, 5), (0, 0, 0, 0), (2, 4, 5, 10), (0, 5, 0, 9)]
)
def test_fisher_is_one_without_evidence(s1: int, n1: int, s2: int, n2: int) -> None:
    """No trials on a side, or identical proportions, give p = 1."""
    assert fisher_exact_two_sided(s1, n1, s2, n2) == 1.0


@given(counts(), counts())
def test_fisher_p_is_a_probability(base: tuple[int, int], head: tuple[int, int]) -> None:
    """The p-value lies in (0, 1]."""
    assert 0.0 < fisher_exact_two_sided(*base, *head) <= 1.0


# --------------------------------------------------------------------------- Holm, BH


def test_holm_hand_example() -> None:
    """Holm multiplies the i-th smallest p by (m - i + 1) and carries the running maximum."""
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> max 0.06
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # 0.05, 0.08, 0.09, max(0.09, 0.08), max(0.09, 0.05)
    assert holm_adjust([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx(
        [0.05, 0.08, 0.09, 0.09, 0.09]
    )


def test_bh_hand_example() -> None:
    """BH multiplies the i-th smallest p by m / i and carries the running minimum from the top."""
    # sorted: 0.005*4/1 = 0.02, 0.01*4/2 = 0.02, 0.03*4/3 = 0.04, 0.04*4/4 = 0.04
    assert benjamini_hochberg_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx(
        [0.02, 0.04, 0.04, 0.02]
    )
    assert benjamini_hochberg_adjust([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05] * 5)


def test_adjustments_cap_at_one_and_accept_empty_input() -> None:
    """Adjusted p-values never exceed 1, and no p-values give an empty list."""
    assert holm_adjust([0.6, 0.7]) == [1.0, 1.0]
    assert benjamini_hochberg_adjust([0.9, 0.95]) == [0.95, 0.95]
    assert holm_adjust([]) == []
    assert benjamini_hochberg_adjust([]) == []


@pytest.mark.parametrize("adjust", [holm_adjust, benjamini_hochberg_adjust])
def test_adjustments_reject_non_probabilities(
    adjust: Callable[[Sequence[float]], list[float]],
) -> None:
    """A p-value outside [0, 1] (or NaN) is a ValueError."""
    for bad in ([1.5], [-0.1], [math.nan]):
        with pytest.raises(ValueError, match="p-values"):
            adjust(bad)


@given(pvalue_lists)
def test_adjusted_pvalues_are_bounded_and_order_preserving(pvalues: list[float]) -> None:
    """Both adjustments give raw <= adjusted <= 1 and keep the order of the raw p-values."""
    for adjusted in (holm_adjust(pvalues), benjamini_hochberg_adjust(pvalues)):
        assert all(p <= q <= 1.0 for p, q in zip(pvalues, adjusted, strict=True))
        pairs = sorted(zip(pvalues, adjusted, strict=True))
        assert all(a[1] <= b[1] for a, b in itertools.pairwise(pairs))


@given(pvalue_lists)
def test_bh_is_never_stricter_than_holm(pvalues: list[float]) -> None:
    """BH (FDR control) adjusts each p-value no more than Holm (FWER control)."""
    pairs = zip(benjamini_hochberg_adjust(pvalues), holm_adjust(pvalues), strict=True)
    assert all(bh <= holm for bh, holm in pairs)


# --------------------------------------------------------------------------- sample size


def test_trials_needed_matches_r_power_prop_test() -> None:
    """R documents power.prop.test(p1 = .50, p2 = .75, power = .90) as n = 76.7, so 77 trials."""
    assert trials_needed(0.5, 0.75, power=0.9) == 77


def test_trials_needed_fleiss_example_with_and_without_correction() -> None:
    """5% vs 10% at alpha 0.05 and 80% power needs 435 per group, 474 with continuity correction."""
    # Hand-computed from the documented formula: n = (1.95996*0.37249 + 0.84162*0.37081)^2 /
    # 0.05^2 = 434.4; corrected n/4 * (1 + sqrt(1 + 4/(434.4*0.05)))^2 = 473.6.
    assert trials_needed(0.05, 0.10) == 435
    assert trials_needed(0.05, 0.10, continuity_correction=True) == 474


def test_trials_needed_is_none_without_a_difference() -> None:
    """Equal rates have nothing to detect."""
    assert trials_needed(0.4, 0.4) is None


def test_trials_needed_is_symmetric_and_grows_with_power() -> None:
    """The order of the rates does not matter; more power or a smaller alpha needs more trials."""
    assert trials_needed(0.3, 0.6) == trials_needed(0.6, 0.3)
    base = trials_needed(0.3, 0.6)
    assert base is not None
    assert trials_needed(0.3, 0.6, power=0.95) > base  # type: ignore[operator]
    assert trials_needed(0.3, 0.6, alpha=0.01) > base  # type: ignore[operator]
    assert trials_needed(0.0, 1.0) == 2


@pytest.mark.parametrize(
    "kwargs", [{"p1": -0.1, "p2": 0.5}, {"p1": 0.5, "p2": 1.2}, {"alpha": 0.0}, {"power": 1.0}]
)
def test_trials_needed_rejects_bad_arguments(kwargs: dict[str, float]) -> None:
    """Rates outside [0, 1] and alpha or power outside (0, 1) are ValueErrors."""
    args = {"p1": 0.2, "p2": 0.5} | kwargs
    p1, p2 = args.pop("p1"), args.pop("p2")
    with pytest.raises(ValueError, match=r"p1 and p2|alpha|power"):
        trials_needed(p1, p2, **args)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- compare, verdict


def test_compare_proportions_fields() -> None:
    """BASE 48/80 vs HEAD 56/70 gives +0.2, Newcombe's interval, Fisher's p and a sample size."""
    result = compare_proportions(48, 80, 56, 70)
    assert result.rate1 == 0.6
    assert result.rate2 == 0.8
    assert result.difference == pytest.approx(0.2)
    assert result.difference_interval == pytest.approx((0.0524, 0.3339), abs=5e-5)
    assert result.p_value == fisher_exact_two_sided(48, 80, 56, 70)
    assert result.trials_needed == trials_needed(0.6, 0.8)


def test_compare_proportions_without_evidence() -> None:
    """Equal rates need no trials; a side without trials gives rate 0 and no sample size."""
    assert compare_proportions(3, 6, 5, 10).trials_needed is None
    empty = compare_proportions(0, 0, 4, 5)
    assert (empty.rate1, empty.trials_needed, empty.p_value) == (0.0, None, 1.0)
    assert empty.difference_interval == (-1.0, 1.0)


def _comparison(lower: float, upper: float) -> ProportionComparison:
    return ProportionComparison(
        rate1=0.5,
        rate2=0.5 + (lower + upper) / 2,
        difference=(lower + upper) / 2,
        difference_interval=(lower, upper),
        p_value=0.5,
        trials_needed=None,
    )


@pytest.mark.parametrize(
    ("interval", "adjusted_p", "expected"),
    [
        ((0.05, 0.4), 0.01, "improved"),
        ((-0.4, -0.05), 0.01, "regressed"),
        ((0.05, 0.4), 0.2, "inconclusive"),
        ((-0.05, 0.3), 0.01, "inconclusive"),
        ((-0.05, 0.08), 0.6, "unchanged"),
        ((0.01, 0.05), 0.01, "improved"),
        ((-0.1, 0.05), 0.6, "inconclusive"),
        ((-0.6, 0.6), 1.0, "inconclusive"),
    ],
)
def test_verdict_rule(interval: tuple[float, float], adjusted_p: float, expected: str) -> None:
    """Significant with the interval on one side is a change; inside the margin is unchanged."""
    assert verdict(_comparison(*interval), adjusted_p=adjusted_p) == expected


def test_verdict_margin_is_a_keyword() -> None:
    """A wider margin turns an inconclusive narrow interval into unchanged."""
    comparison = _comparison(-0.15, 0.12)
    assert verdict(comparison, adjusted_p=0.7) == "inconclusive"
    assert verdict(comparison, adjusted_p=0.7, margin=0.2) == "unchanged"


@pytest.mark.parametrize("kwargs", [{"margin": 0.0}, {"margin": 1.5}, {"alpha": 1.0}])
def test_verdict_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    """A margin outside (0, 1] or alpha outside (0, 1) is a ValueError."""
    with pytest.raises(ValueError, match=r"margin|alpha"):
        verdict(_comparison(0.0, 0.1), adjusted_p=0.5, **kwargs)


def test_verdict_end_to_end() -> None:
    """Counts from real comparisons map to the expected verdicts."""
    assert verdict(compare_proportions(0, 40, 40, 40), adjusted_p=0.001) == "improved"
    assert verdict(compare_proportions(40, 40, 0, 40), adjusted_p=0.001) == "regressed"
    assert verdict(compare_proportions(500, 1000, 500, 1000), adjusted_p=1.0) == "unchanged"
    assert verdict(compare_proportions(2, 3, 1, 3), adjusted_p=1.0) == "inconclusive"


# --------------------------------------------------------------------------- scenario statistics


def test_scenario_statistics_mixed_trials() -> None:
    """A mix of verdicts fills every field, with infra-errors out of the graded denominator."""
    result = scenario_statistics(
        ["pass", "fail", "infra-error", "skipped-budget", "pass", "timeout"],
        durations=[100, 200, 50, 0, 300, 1000],
        tokens=[10, None, 5, 999, 30, 20],
        costs=[0.1, 0.2, None, 9.0, 0.3, None],
    )
    assert (result.executed, result.passed, result.infra_errors, result.skipped) == (5, 2, 1, 1)
    assert result.graded == 4
    assert result.pass_rate_graded == 0.5
    assert result.pass_rate == 0.4
    assert result.wilson_interval == wilson_interval(2, 4)
    assert list(result.pass_at_k) == [1, 2, 3, 4]
    assert result.pass_at_k[1] == 0.5
    assert result.pass_at_k[4] == 1.0
    assert result.pass_hat_k[1] == 0.5
    assert result.pass_hat_k[4] == 0.0
    assert result.stability == "flaky"
    assert (result.mean_tokens, result.tokens_p95) == (16.25, 30)
    assert result.mean_cost == pytest.approx(0.2)
    assert result.cost_p95 == 0.3
    assert result.cost_per_pass == pytest.approx(0.3)
    assert (result.mean_duration_ms, result.duration_p95_ms) == (330, 1000)


def test_scenario_statistics_reference_budget_case() -> None:
    """pass, pass, skipped-budget has pass rate 1 over two executed trials (reference case)."""
    result = scenario_statistics(
        ["pass", "pass", "skipped-budget"],
        durations=[5, 5, 0],
        tokens=[None] * 3,
        costs=[None] * 3,
    )
    assert (result.executed, result.pass_rate, result.stability) == (2, 1.0, "stable-pass")
    assert (result.mean_duration_ms, result.duration_p95_ms) == (5, 5)
    assert result.mean_tokens is None
    assert result.tokens_p95 is None
    assert result.mean_cost is None
    assert result.cost_per_pass is None


def test_scenario_statistics_without_trials() -> None:
    """No trials give zeros, an uninformative interval, empty k tables and no stability."""
    result = scenario_statistics([], durations=[], tokens=[], costs=[])
    assert (result.executed, result.graded, result.pass_rate, result.pass_rate_graded) == (
        0,
        0,
        0,
        0,
    )
    assert result.wilson_interval == (0.0, 1.0)
    assert result.pass_at_k == {}
    assert result.pass_hat_k == {}
    assert result.stability is None
    assert (result.mean_duration_ms, result.duration_p95_ms) == (0, 0)


def test_scenario_statistics_only_infra_errors() -> None:
    """Only infra-errors leave nothing graded: the model's rate is 0 and stability unknown."""
    result = scenario_statistics(
        ["infra-error", "infra-error"], durations=[10, 20], tokens=[None, 7], costs=[0.5, None]
    )
    assert (result.executed, result.graded, result.pass_rate_graded) == (2, 0, 0.0)
    assert result.stability is None
    assert result.pass_at_k == {}
    assert result.mean_tokens == 7
    assert result.mean_cost == 0.5
    assert result.cost_per_pass is None


def test_scenario_statistics_all_fail() -> None:
    """All graded trials failing is stable-fail with pass@k 0 for every k."""
    result = scenario_statistics(
        ["fail", "timeout", "budget-exceeded"],
        durations=[1, 2, 3],
        tokens=[1, 2, 3],
        costs=[0.1] * 3,
    )
    assert result.stability == "stable-fail"
    assert set(result.pass_at_k.values()) == {0.0}
    assert result.cost_per_pass is None


def test_scenario_statistics_rounds_half_durations_up() -> None:
    """A mean duration of 2.5 ms becomes 3, as the reference's Math.round does."""
    result = scenario_statistics(
        ["fail", "pass"], durations=[2, 3], tokens=[None, None], costs=[None, None]
    )
    assert result.mean_duration_ms == 3


def test_scenario_statistics_rejects_bad_input() -> None:
    """Sequences of different lengths or an unknown verdict are ValueErrors."""
    with pytest.raises(ValueError, match="same length"):
        scenario_statistics(["pass"], durations=[], tokens=[None], costs=[None])
    with pytest.raises(ValueError, match="unknown verdicts: maybe"):
        scenario_statistics(["maybe"], durations=[1], tokens=[None], costs=[None])


@pytest.mark.parametrize(("n", "p"), [(1_001, 0.3), (2_500, 0.5), (20_000, 0.999)])
def test_binomial_terms_of_many_trials_match_exact_fractions(n: int, p: float) -> None:
    """Beyond 1,000 trials comb(n, k) overflows a float: the terms still match exactly."""
    from fractions import Fraction

    from atlante_eval.stats.exact import binomial_pmf

    terms = binomial_pmf(n, p)
    assert sum(terms) == pytest.approx(1.0, abs=1e-9)
    chance = Fraction(p)
    mode, spread = round(n * p), math.ceil(3 * math.sqrt(n * p * (1 - p)))
    for k in {0, n, *range(max(0, mode - spread), min(n, mode + spread) + 1, max(1, spread // 4))}:
        exact = float(math.comb(n, k) * chance**k * (1 - chance) ** (n - k))
        assert terms[k] == pytest.approx(exact, rel=1e-9, abs=1e-300)
