"""Trials needed at the real target power: compare's rule, not the normal approximation."""

from __future__ import annotations

import pytest
from reports import counts, report

from atlante_eval import compare_reports
from atlante_eval.stats.planning import OneLookRule, detectable_drop, one_look_power
from atlante_eval.stats.proportions import trials_needed
from atlante_eval.stats.simulation import fixed_power
from atlante_eval.views.compare_render import render_text

RULE = OneLookRule(alpha=0.05, change_alpha=0.05, margin=0.1)


@pytest.mark.parametrize(
    ("p1", "p2", "n", "target", "margin"),
    [
        (0.9, 0.7, 40, "regressed", 0.1),
        (0.3, 0.6, 25, "improved", 0.1),
        (0.95, 0.95, 120, "unchanged", 0.1),
        (0.5, 0.55, 80, "unchanged", 0.35),
    ],
)
def test_power_equals_full_enumeration(
    p1: float, p2: float, n: int, target: str, margin: float
) -> None:
    """The boundary search sums the same outcomes as enumerating every pair of counts."""
    rule = OneLookRule(alpha=0.05, change_alpha=0.05, margin=margin)
    found = one_look_power(
        rule,
        base_rate=p1,
        head_rate=p2,
        base_trials=n,
        head_trials=n,
        target=target,  # type: ignore[arg-type]
    )
    expected = fixed_power(
        base_rate=p1, head_rate=p2, base_trials=n, head_trials=n, target=target,  # type: ignore[arg-type]
        alpha=0.05, margin=margin,
    )  # fmt: skip
    assert found == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    ("base", "head"),
    [((10, 0), (7, 3)), ((9, 1), (5, 5)), ((20, 0), (20, 0)), ((3, 0), (2, 1))],
)
def test_trials_needed_delivers_the_power_it_claims(
    base: tuple[int, int], head: tuple[int, int]
) -> None:
    """At the observed rates, compare's rule at trialsNeeded per side decides 80% of the time."""
    result = compare_reports(report({"s": counts(*base)}), report({"s": counts(*head)}))
    row = result.scenarios["s"]
    assert row.verdict == "inconclusive"
    needed = row.trials_needed
    assert needed is not None
    p1, p2 = row.base.pass_rate, row.head.pass_rate
    target = "unchanged" if abs(p2 - p1) < 0.1 else ("regressed" if p2 < p1 else "improved")
    power = fixed_power(
        base_rate=p1, head_rate=p2, base_trials=needed, head_trials=needed,
        target=target, alpha=0.05, margin=0.1,  # type: ignore[arg-type]
    )  # fmt: skip
    assert power >= 0.8


def test_a_small_change_that_never_becomes_unchanged_says_so() -> None:
    """95% -> 90% is not called unchanged 80% of the time at any count up to 200 per side."""
    result = compare_reports(report({"s": counts(19, 1)}), report({"s": counts(18, 2)}))
    assert result.scenarios["s"].trials_needed is None
    assert "inconclusive (over 200 graded trials/side needed)" in render_text(result)


def test_the_normal_approximation_falls_short_of_its_power() -> None:
    """Fleiss's 80% is 72-75% for compare's rule: why trialsNeeded is searched exactly."""
    for p1, p2 in ((0.9, 0.7), (1.0, 0.8), (1.0, 0.5)):
        n = trials_needed(p1, p2)
        assert n is not None
        power = fixed_power(
            base_rate=p1, head_rate=p2, base_trials=n, head_trials=n, target="regressed",
            alpha=0.05, margin=0.1,
        )  # fmt: skip
        assert power < 0.78


def test_detectable_drop_reads_power_from_the_top() -> None:
    """3 trials per side cannot detect any drop; 20 per side detect drops from 100% of 35+."""

    def at(n: int) -> int | None:
        return detectable_drop(
            lambda rate: one_look_power(
                RULE,
                base_rate=1.0,
                head_rate=rate,
                base_trials=n,
                head_trials=n,
                target="regressed",
            )
        )

    assert at(3) is None
    found = at(20)
    assert found is not None
    assert 25 <= found <= 50
