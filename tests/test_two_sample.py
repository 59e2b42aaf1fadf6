"""The arms' adaptive design: both sides grow, calibrated exactly, checked by simulation."""

from __future__ import annotations

import itertools
import math

import pytest

from atlante_eval.stats.boundaries import decisions
from atlante_eval.stats.exact import Cell, horner
from atlante_eval.stats.futility import FUTILITY
from atlante_eval.stats.sequential import SequentialDesign, boundaries, look_schedule
from atlante_eval.stats.simulation import simulate_arms
from atlante_eval.stats.two_sample import (
    arm_calibration,
    arm_decidable,
    assess_arm,
    two_sample_change_error,
    two_sample_counts,
    two_sample_unchanged_error,
)

ALPHA = 0.05
LOOKS = look_schedule(4, 50)


def _design(
    family: int = 1, *, margin: float = 0.1, looks: tuple[int, ...] = LOOKS
) -> SequentialDesign:
    return SequentialDesign(alpha=ALPHA, margin=margin, looks=looks, family=family)


def _toy_rule(k: int, s: int, x: int) -> Cell:
    """Stop as regressed when the arm trails by two or more, as improved when it leads by
    two or more; at look 1 also stop unchanged on a tie."""
    if x - s >= 2:
        return "improved"
    if s - x >= 2:
        return "regressed"
    return "unchanged" if k == 1 and s == x else "continue"


def test_path_counts_match_brute_force_enumeration() -> None:
    """Every pair of pass/fail sequences is counted once, where it first stops."""
    looks = (1, 2, 4)
    counts = two_sample_counts(looks, _toy_rule)
    expected: dict[tuple[int, str, int, int], int] = {}
    for control in itertools.product((0, 1), repeat=looks[-1]):
        for arm in itertools.product((0, 1), repeat=looks[-1]):
            for k, n in enumerate(looks):
                s, x = sum(control[:n]), sum(arm[:n])
                cell: str = _toy_rule(k, s, x)
                if cell == "continue" and k == len(looks) - 1:
                    cell = "max-trials"
                if cell != "continue":
                    key = (k, cell, s, x)
                    # a pair is one path up to its stop: count distinct prefixes
                    expected[key] = expected.get(key, 0) + 1
                    break
    found: dict[tuple[int, str, int, int], int] = {}
    for k, stops in enumerate(counts.stops):
        remaining = 2 * (looks[-1] - looks[k])  # the brute force counted every completion
        for code, grid in stops.items():
            for s, row in enumerate(grid):
                for x, c in enumerate(row):
                    if c:
                        found[(k, code, s, x)] = c * 2**remaining
    assert found == expected


def test_the_null_polynomial_is_the_chance_under_a_common_rate() -> None:
    """The polynomial in one rate agrees with the two-rate sum, at any common rate."""
    counts = two_sample_counts((2, 3, 5), _toy_rule)
    codes = ("improved", "regressed")
    polynomial = counts.null_polynomial(codes)
    for p in (0.0, 0.13, 0.5, 0.77, 1.0):
        assert math.isclose(horner(polynomial, p), counts.chance(codes, p, p), abs_tol=1e-12)
    every = ("improved", "regressed", "unchanged", "max-trials")
    assert math.isclose(counts.chance(every, 0.3, 0.6), 1.0, rel_tol=1e-12)


@pytest.mark.parametrize("family", [1, 2, 5])
def test_exact_worst_case_wrong_change_is_within_the_share(family: int) -> None:
    """Over every common pass rate and every outcome of both sides, a wrong change
    happens with chance at most alpha / family; the unchanged rule stays within alpha."""
    design = _design(family)
    found = arm_calibration(LOOKS, share=design.share, alpha=ALPHA, margin=0.1)
    assert 0.0 < found.critical_p < design.share
    assert found.change_error <= design.share
    # the calibration is the largest that holds: the next attainable p-value breaches it
    assert two_sample_change_error(LOOKS, critical_p=found.critical_p, alpha=ALPHA) == (
        found.change_error
    )
    assert found.unchanged_error <= ALPHA


def test_one_look_calibration_breaches_the_share_over_many_looks() -> None:
    """Judging every look as if it were the only one inflates the error past alpha."""
    naive = arm_calibration((LOOKS[-1],), share=ALPHA, alpha=ALPHA, margin=0.1)
    assert two_sample_change_error(LOOKS, critical_p=naive.critical_p, alpha=ALPHA) > ALPHA


def test_a_fixed_baseline_calibration_does_not_hold_when_the_control_grows() -> None:
    """The fixed-baseline design calibrated for the control's count at the first look
    assumes that count stays: applied to a control that grows with the arm, it breaches
    alpha. The two-sample calibration holds."""
    fixed = boundaries(_design(), LOOKS[0])
    assert two_sample_change_error(LOOKS, critical_p=fixed.critical_p, alpha=ALPHA) > ALPHA
    own = arm_calibration(LOOKS, share=ALPHA, alpha=ALPHA, margin=0.1)
    assert own.critical_p < fixed.critical_p
    assert own.change_error <= ALPHA


def test_unchanged_is_reachable_with_a_wide_margin_and_stays_within_alpha() -> None:
    """A wide margin lets equal arms be called unchanged; the chance of calling a true
    change of the margin unchanged is at most alpha."""
    looks = look_schedule(10, 50)
    found = arm_calibration(looks, share=ALPHA, alpha=ALPHA, margin=0.3)
    assert found.unchanged_level > 0.0
    assert found.unchanged_error <= ALPHA
    assert two_sample_unchanged_error(looks, level=found.unchanged_level, margin=0.3) == (
        found.unchanged_error
    )
    look = assess_arm(
        _design(margin=0.3, looks=looks),
        control_passed=40,
        control_graded=50,
        passed=40,
        graded=50,
        look=50,
    )
    assert (look.verdict, look.stop) == ("unchanged", "decided")


def test_simulation_agrees_with_the_exact_error_and_the_naive_rule_breaches() -> None:
    """Seeded runs of the very rule a run applies: equal arms are rarely called changed
    (within the exact figure's sampling error); a one-look rule is called changed more."""
    design = _design()
    exact = arm_calibration(LOOKS, share=ALPHA, alpha=ALPHA, margin=0.1).change_error
    runs = 2000
    null = simulate_arms(design, control_rate=0.5, arm_rate=0.5, runs=runs, seed=11)
    wrong = null.rate("improved", "regressed")
    assert wrong <= exact + 3 * math.sqrt(exact * (1 - exact) / runs)
    naive = simulate_arms(design, control_rate=0.5, arm_rate=0.5, runs=runs, seed=11, naive=True)
    assert naive.rate("improved", "regressed") > ALPHA
    flip = simulate_arms(design, control_rate=1.0, arm_rate=0.0, runs=50, seed=3)
    assert flip.decisions == {"regressed": 50}
    assert flip.mean_trials == LOOKS[1]  # 4/4 against 0/4 is p 0.029: decided at 6/6 against 0/6


def test_the_look_agrees_with_the_rule_table_and_is_reproducible() -> None:
    """assess_arm's verdict is the rule's cell; the same counts give the same look."""
    design = _design(3)
    found = arm_calibration(LOOKS, share=design.share, alpha=ALPHA, margin=0.1)
    table = decisions(
        9, 9, critical_p=found.critical_p, alpha=ALPHA, margin=0.1, level=found.unchanged_level
    )
    for s, x in ((9, 0), (0, 9), (5, 5), (9, 3)):
        look = assess_arm(design, control_passed=s, control_graded=9, passed=x, graded=9, look=9)
        cell = table[s][x]
        assert look.verdict == ("inconclusive" if cell == "continue" else cell)
        again = assess_arm(design, control_passed=s, control_graded=9, passed=x, graded=9, look=9)
        assert again == look


def test_futility_stops_equal_arms_and_curtails_what_cannot_be_decided() -> None:
    """Equal, middling arms near the last look cannot be decided: they stop as undecidable;
    a state that no outcome can decide has chance exactly 0."""
    design = _design()
    look = assess_arm(design, control_passed=16, control_graded=32, passed=16, graded=32, look=32)
    assert look.stop == "undecidable"
    assert look.decidable is not None
    assert look.decidable < FUTILITY
    found = arm_calibration(LOOKS, share=ALPHA, alpha=ALPHA, margin=0.1)
    rule = (found.critical_p, ALPHA, 0.1, found.unchanged_level)
    assert arm_decidable((24, 48), (24, 48), (2,), rule) == 0.0
    # early, a clear lead is likely to be decided: the comparison goes on
    early = assess_arm(design, control_passed=4, control_graded=4, passed=1, graded=4, look=4)
    assert early.stop is None
    assert early.decidable is not None
    assert early.decidable > FUTILITY


def test_a_short_side_is_judged_as_it_is() -> None:
    """Infra-errors leave one side short: the look uses both sides' real counts."""
    design = _design()
    look = assess_arm(design, control_passed=9, control_graded=9, passed=0, graded=7, look=9)
    assert look.verdict == "regressed"
    assert look.graded == 7
    empty = assess_arm(design, control_passed=3, control_graded=3, passed=0, graded=0, look=4)
    assert (empty.verdict, empty.stop) == ("inconclusive", None)
