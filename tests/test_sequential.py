"""The adaptive design: exact calibration, its error rates, power and cost, futility, simulation."""

from __future__ import annotations

import itertools
import math

import pytest

from atlante_eval.stats.boundaries import change_error, decisions
from atlante_eval.stats.exact import Outcomes, binomial_pmf, fisher_table, horner, path_counts
from atlante_eval.stats.futility import FUTILITY, predictive
from atlante_eval.stats.operating import (
    bonferroni_outcomes,
    design_outcomes,
    family_error,
)
from atlante_eval.stats.operating import change_error as worst_change
from atlante_eval.stats.planning import fixed_trials
from atlante_eval.stats.proportions import fisher_exact_two_sided
from atlante_eval.stats.sequential import SequentialDesign, assess, boundaries, look_schedule
from atlante_eval.stats.simulation import fixed_power, simulate

ALPHA = 0.05
LOOKS = look_schedule(4, 50)


def _design(scenarios: int = 1, *, margin: float = 0.1) -> SequentialDesign:
    """The default design for a suite of ``scenarios`` (compare's family: plus overall)."""
    family = scenarios + (1 if scenarios >= 2 else 0)
    return SequentialDesign(alpha=ALPHA, margin=margin, looks=LOOKS, family=family)


def test_look_schedule_grows_by_half_and_ends_at_the_maximum() -> None:
    """Looks grow 1.5x from the first to the last, always by at least one trial."""
    assert look_schedule(4, 50) == (4, 6, 9, 14, 21, 32, 48, 50)
    assert look_schedule(1, 3) == (1, 2, 3)
    assert look_schedule(5, 5) == (5,)
    with pytest.raises(ValueError, match="first <= last"):
        look_schedule(0, 5)
    with pytest.raises(ValueError, match="first <= last"):
        look_schedule(6, 5)


def test_bad_designs_are_refused() -> None:
    """alpha, margin, looks and family out of range raise ValueError."""
    for bad in (
        {"alpha": 0.0},
        {"alpha": 1.0},
        {"margin": 0.0},
        {"looks": ()},
        {"looks": (4, 4)},
        {"family": 0},
    ):
        arguments = {"alpha": 0.05, "margin": 0.1, "looks": (4,), "family": 1, **bad}
        with pytest.raises(ValueError, match=r"must|needs"):
            SequentialDesign(**arguments)  # type: ignore[arg-type]


def test_fisher_table_is_the_fisher_test_bit_for_bit() -> None:
    """The table computed a margin at a time equals the one-table Fisher test exactly."""
    for n0, n in ((0, 3), (4, 0), (7, 5), (20, 9), (12, 12)):
        table = fisher_table(n0, n)
        for s0, x in itertools.product(range(n0 + 1), range(n + 1)):
            assert table[s0][x] == fisher_exact_two_sided(s0, n0, x, n)


def test_path_counts_match_brute_force_enumeration() -> None:
    """Every baseline and HEAD sequence enumerated one by one gives the same chances."""
    design = SequentialDesign(alpha=0.2, margin=0.4, looks=(2, 3, 5))
    n0 = 4
    outcomes = design_outcomes(design, n0)
    p0, p1 = 0.7, 0.35
    expected: dict[str, float] = {}
    for s0 in range(n0 + 1):
        weight = math.comb(n0, s0) * p0**s0 * (1 - p0) ** (n0 - s0)
        for sequence in itertools.product((0, 1), repeat=5):
            chance = weight * math.prod(p1 if t else 1 - p1 for t in sequence)
            outcome = "max-trials"
            for look in design.looks:
                judged = assess(
                    design,
                    base_passed=s0,
                    base_graded=n0,
                    passed=sum(sequence[:look]),
                    graded=look,
                    look=look,
                )
                if judged.stop is not None:
                    outcome = judged.verdict if judged.stop == "decided" else "undecidable"
                    break
            expected[outcome] = expected.get(outcome, 0.0) + chance
    found = outcomes.chances(p0, p1)
    for code, chance in found.items():
        assert chance == pytest.approx(expected.get(code, 0.0), abs=1e-12)
    assert sum(found.values()) == pytest.approx(1.0)


def test_null_polynomial_agrees_with_the_outcome_sums() -> None:
    """The raised polynomial and the direct sums give the same error at any common rate."""
    outcomes = design_outcomes(_design(), 20)
    polynomial = outcomes.null_polynomial(("improved", "regressed"))
    for p in (0.0, 0.1, 0.37, 0.5, 0.9, 1.0):
        direct = outcomes.chances(p, p)
        assert horner(polynomial, p) == pytest.approx(
            direct["improved"] + direct["regressed"], abs=1e-12
        )


@pytest.mark.parametrize("baseline", [10, 20, 40])
@pytest.mark.parametrize("scenarios", [1, 5, 20])
def test_exact_worst_case_family_error_is_within_alpha(baseline: int, scenarios: int) -> None:
    """Over every common pass rate, the suite's chance of any wrong change is at most alpha."""
    design = _design(scenarios)
    bounds = boundaries(design, baseline)
    assert bounds.change_error <= design.share
    per_scenario, _ = worst_change(design_outcomes(design, baseline))
    assert per_scenario <= bounds.change_error + 1e-12  # futility only lowers it
    assert family_error(per_scenario, scenarios) <= ALPHA
    # Calibrated, not merely safe: the error is near the scenario's share, unlike before.
    assert bounds.change_error >= 0.75 * design.share


def test_a_design_calibrated_for_one_look_breaches_alpha_over_many() -> None:
    """The check sees the breach: one look's critical value applied at every look exceeds alpha."""
    single = boundaries(SequentialDesign(alpha=ALPHA, margin=0.1, looks=(50,)), 20)
    breached = change_error(20, LOOKS, critical_p=single.critical_p, alpha=ALPHA)
    assert breached > ALPHA
    assert boundaries(_design(), 20).critical_p < single.critical_p


def test_the_earlier_design_was_valid_but_far_below_alpha() -> None:
    """Bonferroni over the looks: about 1.2% against the nominal 5% (the audit's figure)."""
    error, _ = worst_change(bonferroni_outcomes(_design(), 20))
    assert 0.010 < error < 0.014


def test_power_on_the_documented_drops_with_a_20_trial_baseline() -> None:
    """0.9 -> 0.3 is found at least 99% of the time, 0.9 -> 0.6 at least 55% (was 44%)."""
    outcomes = design_outcomes(_design(), 20)
    earlier = bonferroni_outcomes(_design(), 20)
    assert outcomes.chances(0.9, 0.3)["regressed"] >= 0.99
    assert outcomes.chances(0.9, 0.6)["regressed"] >= 0.55
    assert earlier.chances(0.9, 0.6)["regressed"] < 0.45


def _nightly(outcomes: Outcomes) -> float:
    """Expected HEAD trials of 18 unchanged scenarios at 90% and drops 0.9->0.3, 0.9->0.6."""
    return (
        18 * outcomes.expected_trials(0.9, 0.9)
        + outcomes.expected_trials(0.9, 0.3)
        + outcomes.expected_trials(0.9, 0.6)
    )


def test_the_nightly_suite_costs_a_third_of_the_trials() -> None:
    """20 scenarios, 20-trial baseline: at most 350 expected HEAD trials, against 971 before."""
    design = _design(20)
    assert _nightly(design_outcomes(design, 20)) <= 350
    assert _nightly(bonferroni_outcomes(design, 20)) == pytest.approx(971, abs=1)
    # Also with one scenario's (larger) alpha share for each of them.
    assert _nightly(design_outcomes(_design(), 20)) <= 350


def test_futility_stops_a_scenario_that_cannot_be_decided() -> None:
    """18/20 against 4/4 cannot become a change worth deciding: undecidable at once."""
    look = assess(_design(20), base_passed=18, base_graded=20, passed=4, graded=4, look=4)
    assert (look.verdict, look.stop) == ("inconclusive", "undecidable")
    assert look.decidable is not None
    assert look.decidable < FUTILITY
    going = assess(_design(), base_passed=18, base_graded=20, passed=2, graded=4, look=4)
    assert going.stop is None
    assert going.decidable is not None
    assert going.decidable >= FUTILITY
    last = assess(_design(), base_passed=18, base_graded=20, passed=45, graded=50, look=50)
    assert (last.stop, last.decidable) == (None, None)


def test_curtailment_when_no_outcome_can_decide() -> None:
    """1/2 in BASE decides nothing at a 20-scenario share: the chance is exactly 0 at once."""
    design = _design(20)
    for passed in (0, 2, 4):
        look = assess(design, base_passed=1, base_graded=2, passed=passed, graded=4, look=4)
        assert (look.decidable, look.stop) == (0.0, "undecidable")
    assert min(min(row) for row in fisher_table(2, 50)[1:2]) > design.share


def test_predictive_chances_are_the_beta_binomial() -> None:
    """Uniform prior: after 3 of 4, the next trial passes with chance 4/6; the row sums to 1."""
    assert predictive(3, 4, 1) == pytest.approx((2 / 6, 4 / 6))
    assert sum(predictive(7, 20, 30)) == pytest.approx(1.0)


def test_decisions_are_reproducible_and_allow_a_short_look() -> None:
    """The same counts give the same look; a look short of its plan (infra-errors) still judges."""
    design = _design(5)
    first = assess(design, base_passed=19, base_graded=20, passed=3, graded=9, look=9)
    again = assess(design, base_passed=19, base_graded=20, passed=3, graded=9, look=9)
    assert first == again
    short = assess(design, base_passed=19, base_graded=20, passed=3, graded=7, look=9)
    assert short.graded == 7
    assert short.decidable is not None or short.stop == "decided"


def test_critical_values_are_the_same_when_computed_again() -> None:
    """A fresh process (caches cleared) calibrates the same design to the same numbers."""
    from atlante_eval.stats import boundaries as calibration
    from atlante_eval.stats import exact, futility

    design = _design(5)
    first = boundaries(design, 20)
    look = assess(design, base_passed=18, base_graded=20, passed=3, graded=6, look=6)
    for cached in (
        calibration.calibrate,
        calibration.decisions,
        calibration.sides,
        exact.fisher_table,
        futility.decidable_chances,
        futility.predictive,
    ):
        cached.cache_clear()
    assert boundaries(design, 20) == first
    assert assess(design, base_passed=18, base_graded=20, passed=3, graded=6, look=6) == look


def test_unchanged_is_reachable_with_a_large_baseline_and_stays_within_alpha() -> None:
    """40/40 against an always-passing HEAD ends unchanged; a true change of the margin rarely."""
    design = _design()
    bounds = boundaries(design, 40)
    assert bounds.unchanged_error <= ALPHA
    outcomes = design_outcomes(design, 40)
    assert outcomes.chances(1.0, 1.0)["unchanged"] == pytest.approx(1.0)
    assert outcomes.chances(1.0, 0.9)["unchanged"] <= ALPHA
    cells = decisions(40, 50, critical_p=bounds.critical_p, alpha=ALPHA, margin=0.1, level=0.05)
    assert cells[40][50] == "unchanged"


def test_simulation_of_the_product_rule_agrees_with_the_exact_figures() -> None:
    """Seeded runs through assess land within four standard errors of the exact chances."""
    design = _design()
    outcomes = design_outcomes(design, 20)
    runs = 3000
    for seed, (p0, p1) in enumerate(((0.5, 0.5), (0.9, 0.6), (0.9, 0.9))):
        simulated = simulate(
            design, base_rate=p0, head_rate=p1, base_trials=20, runs=runs, seed=seed
        )
        exact = outcomes.chances(p0, p1)
        for code in ("regressed", "improved", "undecidable"):
            rate = exact[code]
            spread = 4 * math.sqrt(max(rate * (1 - rate), 1e-4) / runs)
            assert abs(simulated.rate(code) - rate) <= spread, (p0, p1, code)
        mean = outcomes.expected_trials(p0, p1)
        assert simulated.mean_trials == pytest.approx(mean, rel=0.1)


def test_naive_looks_breach_alpha_in_simulation_too() -> None:
    """Judging every look with a one-look design wrongly decides changes more often."""
    design = _design()
    naive = simulate(
        design, base_rate=0.5, head_rate=0.5, base_trials=20, runs=2000, seed=11, naive=True
    )
    assert naive.rate("improved", "regressed") > ALPHA


def test_binomial_weights_are_exact_at_the_ends() -> None:
    """A rate of 0 or 1 puts all weight on one count."""
    assert binomial_pmf(3, 0.0) == [1.0, 0.0, 0.0, 0.0]
    assert binomial_pmf(3, 1.0) == [0.0, 0.0, 0.0, 1.0]
    assert path_counts(1, (1,), lambda s0, k, x: "continue").chances(0.5, 0.5)[
        "max-trials"
    ] == pytest.approx(1.0)


def test_fixed_power_is_exact_at_the_extremes() -> None:
    """A sure flip is always detected with enough trials, never with one."""
    sure = {"base_rate": 1.0, "head_rate": 0.0, "base_trials": 10, "alpha": ALPHA, "margin": 0.1}
    assert fixed_power(head_trials=10, target="regressed", **sure) == pytest.approx(1.0)  # type: ignore[arg-type]
    assert fixed_power(head_trials=1, target="regressed", **sure) == pytest.approx(0.0)  # type: ignore[arg-type]


def test_fixed_trials_plans_the_decision_from_one_trial_up() -> None:
    """compare's planning for a fixed run: at least the count where the rule is met."""
    flip = fixed_trials(6, 6, 0, 6, change=True)
    assert flip is not None
    assert 1 <= flip <= 6
    same = fixed_trials(40, 40, 14, 14, change=False, margin=0.35)
    assert same is not None
    assert same > 1
    assert fixed_trials(0, 0, 3, 3, change=True) is None
    assert fixed_trials(3, 6, 3, 6, change=True) is None
