"""The adaptive stopping rule: look schedule, per-look judgement, and its error rates."""

from __future__ import annotations

import math

import pytest

from atlante_eval.stats.planning import fixed_trials
from atlante_eval.stats.sequential import SequentialDesign, assess, look_schedule
from atlante_eval.stats.simulation import fixed_power, fixed_trials_for_power, simulate

ALPHA = 0.05
RUNS = 2000


def _upper(rate: float, runs: int) -> float:
    """``rate`` plus four binomial standard errors: a bound a seeded run never reaches by chance."""
    return rate + 4 * math.sqrt(rate * (1 - rate) / runs)


def test_look_schedule_grows_by_half_and_ends_at_the_maximum() -> None:
    """Looks grow 1.5x from the first to the last, always by at least one trial."""
    assert look_schedule(4, 50) == (4, 6, 9, 14, 21, 32, 48, 50)
    assert look_schedule(1, 3) == (1, 2, 3)
    assert look_schedule(5, 5) == (5,)
    with pytest.raises(ValueError, match="first <= last"):
        look_schedule(0, 5)
    with pytest.raises(ValueError, match="first <= last"):
        look_schedule(6, 5)


def test_design_spends_alpha_evenly_over_the_looks() -> None:
    """Each look's interval is at 1 - alpha/K; bad parameters are refused."""
    design = SequentialDesign(alpha=0.05, margin=0.1, looks=(4, 6, 9, 14, 20))
    assert design.look_alpha == pytest.approx(0.01)
    assert design.look_confidence == pytest.approx(0.99)
    for bad in ({"alpha": 0.0}, {"alpha": 1.0}, {"margin": 0.0}, {"looks": ()}, {"family": 0}):
        arguments = {"alpha": 0.05, "margin": 0.1, "looks": (4,), "family": 1, **bad}
        with pytest.raises(ValueError, match=r"must|needs"):
            SequentialDesign(**arguments)  # type: ignore[arg-type]


def test_a_look_multiplies_the_p_value_by_looks_and_family() -> None:
    """The same counts decide at one look but not when the alpha is shared by many."""
    one = SequentialDesign(alpha=ALPHA, margin=0.1, looks=(6,))
    many = SequentialDesign(alpha=ALPHA, margin=0.1, looks=(4, 6, 9, 14, 20), family=4)
    decided = assess(one, base_passed=6, base_graded=6, passed=0, graded=6)
    shared = assess(many, base_passed=6, base_graded=6, passed=0, graded=4)
    assert decided.verdict == "regressed"
    assert decided.adjusted_p == pytest.approx(decided.p_value)
    assert shared.adjusted_p == pytest.approx(min(1.0, shared.p_value * 20))
    assert shared.verdict == "inconclusive"
    assert shared.interval[0] < decided.interval[0] or shared.interval[1] > decided.interval[1]
    nothing = assess(many, base_passed=6, base_graded=6, passed=0, graded=0)
    assert nothing.verdict == "inconclusive"


@pytest.mark.parametrize("rate", [0.5, 0.9])
def test_no_true_difference_keeps_wrong_changes_under_alpha(rate: float) -> None:
    """With equal true rates, the share of runs ending improved/regressed is at most alpha."""
    design = SequentialDesign(alpha=ALPHA, margin=0.1, looks=look_schedule(4, 50))
    result = simulate(design, base_rate=rate, head_rate=rate, base_trials=20, runs=RUNS, seed=11)
    wrong = result.rate("improved", "regressed")
    assert wrong <= _upper(ALPHA, RUNS)
    assert result.runs == RUNS


def test_judging_every_look_as_one_compare_inflates_the_error() -> None:
    """Without spending alpha over the looks, the same simulation breaches alpha (the breach)."""
    design = SequentialDesign(alpha=ALPHA, margin=0.1, looks=look_schedule(4, 50))
    naive = simulate(
        design, base_rate=0.5, head_rate=0.5, base_trials=20, runs=RUNS, seed=11, naive=True
    )
    guarded = simulate(design, base_rate=0.5, head_rate=0.5, base_trials=20, runs=RUNS, seed=11)
    assert naive.rate("improved", "regressed") > _upper(ALPHA, RUNS)
    assert guarded.rate("improved", "regressed") < naive.rate("improved", "regressed")


def test_wrong_unchanged_stays_under_alpha_at_a_difference_of_the_margin() -> None:
    """A true change of exactly the margin is called unchanged in at most alpha of runs."""
    design = SequentialDesign(alpha=ALPHA, margin=0.3, looks=look_schedule(6, 50))
    result = simulate(design, base_rate=0.9, head_rate=0.6, base_trials=50, runs=RUNS, seed=5)
    assert result.rate("unchanged") <= _upper(ALPHA, RUNS)


def test_a_large_difference_is_decided_with_far_fewer_trials_than_a_fixed_design() -> None:
    """90% -> 30%: the adaptive rule stops early; a fixed run of equal power needs many more."""
    design = SequentialDesign(alpha=ALPHA, margin=0.1, looks=look_schedule(4, 50))
    result = simulate(design, base_rate=0.9, head_rate=0.3, base_trials=20, runs=RUNS, seed=3)
    power = result.rate("regressed")
    assert power >= 0.95
    fixed = fixed_trials_for_power(
        power,
        base_rate=0.9,
        head_rate=0.3,
        base_trials=20,
        target="regressed",
        alpha=ALPHA,
        margin=0.1,
    )
    assert fixed is not None
    assert result.mean_trials <= 0.7 * fixed


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
