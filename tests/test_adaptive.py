"""The adaptive driver: waves, the family it shares alpha with, and agreement with compare."""

from __future__ import annotations

import random
from pathlib import Path

from enginekit import make_scenario
from reports import counts, report

from atlante_eval import RunReport, compare_reports
from atlante_eval.project import Scenario
from atlante_eval.run.adaptive import AdaptiveDriver, AdaptiveSettings


def _settings(base: RunReport, **overrides: object) -> AdaptiveSettings:
    values: dict[str, object] = {
        "baseline": base,
        "baseline_path": "base.json",
        "alpha": 0.05,
        "margin": 0.1,
        "first": 4,
        "max_trials": 20,
        "fixed_count": 3,
        **overrides,
    }
    return AdaptiveSettings(**values)  # type: ignore[arg-type]


def _scenarios(tmp_path: Path, *names: str) -> list[Scenario]:
    return [make_scenario(tmp_path, name) for name in names]


def test_family_counts_what_compare_counts(tmp_path: Path) -> None:
    """Compared scenarios plus the overall row when two are common, even if one is ungraded."""
    base = report({"a": counts(5), "b": counts(0, infra_error=3)})
    driver = AdaptiveDriver(_settings(base), _scenarios(tmp_path, "a", "b", "c"), {})
    assert driver.design.family == 2  # "a", plus overall (two common scenarios)
    assert driver.tracks["b"].base is None  # never graded in BASE: new
    assert driver.tracks["c"].base is None
    single = AdaptiveDriver(_settings(report({"a": counts(5)})), _scenarios(tmp_path, "a"), {})
    assert single.design.family == 1


def test_waves_follow_the_planned_looks(tmp_path: Path) -> None:
    """New scenarios get the fixed count once; undecided ones go look by look to the maximum."""
    base = report({"a": counts(15, 15)})
    driver = AdaptiveDriver(_settings(base), _scenarios(tmp_path, "a", "new"), {})
    assert driver.design.looks == (4, 6, 9, 14, 20)
    assert driver.first_wave() == {"a": 4, "new": 3}
    # 3 of 4, then 5 of 6, 7 of 9, 11 of 14: a drop that might still be decided.
    look = driver.observe("a", report({"a": counts(3, 1)}).scenarios["a"].trials)
    assert look is not None
    assert look.verdict == "inconclusive"
    assert look.decidable is not None
    assert driver.observe("new", []) is None
    assert driver.tracks["new"].stopped == "fixed-count"
    for target, passed in ((6, 5), (9, 7), (14, 11), (20, 16)):
        assert driver.next_wave() == {"a": target}
        trials = report({"a": counts(passed, target - passed)}).scenarios["a"].trials
        driver.observe("a", trials)
    assert driver.tracks["a"].stopped == "max-trials"
    assert driver.next_wave() == {}


def test_an_undecidable_scenario_stops_early(tmp_path: Path) -> None:
    """A small baseline against a HEAD that passes as often: futility stops it at once."""
    base = report({"a": counts(5, 5)})
    driver = AdaptiveDriver(_settings(base), _scenarios(tmp_path, "a"), {})
    driver.first_wave()
    look = driver.observe("a", report({"a": counts(2, 2)}).scenarios["a"].trials)
    assert look is not None
    assert look.decidable is not None
    assert look.decidable < 0.05
    assert driver.tracks["a"].stopped == "undecidable"
    assert driver.next_wave() == {}


def test_definition_digest_changes_are_flagged(tmp_path: Path) -> None:
    """A BASE definition digest that differs from the scenario's own is a changed scenario."""
    base = report({"a": counts(40)})
    with_definition = base.model_copy(
        update={
            "scenarios": {
                "a": base.scenarios["a"].model_copy(update={"definition": "sha256:" + "1" * 64})
            }
        }
    )
    scenarios = _scenarios(tmp_path, "a")
    changed = AdaptiveDriver(_settings(with_definition), scenarios, {"a": "sha256:" + "2" * 64})
    same = AdaptiveDriver(_settings(with_definition), scenarios, {"a": "sha256:" + "1" * 64})
    assert changed.tracks["a"].changed is True
    assert [n.code for n in changed.notices()] == ["adaptive-scenario-changed"]
    assert same.tracks["a"].changed is False
    assert same.notices() == []


def test_a_small_baseline_is_warned_about_before_any_trial(tmp_path: Path) -> None:
    """3 baseline trials: what they can detect, and how many would detect 30 points."""
    driver = AdaptiveDriver(
        _settings(report({"a": counts(3)}), max_trials=50), _scenarios(tmp_path, "a"), {}
    )
    (notice,) = driver.notices()
    assert notice.code == "adaptive-baseline-underpowered"
    assert notice.message.startswith(
        "the baseline's 3 trials per scenario (1 of 1 scenarios) can detect only drops of "
        "75 points or more (from 100%, with 80% power, up to 50 HEAD trials, alpha 0.05); "
        "at least 18 are needed to detect a 30-point drop"
    )
    assert notice.next == "rerun the baseline with --trials 18"
    enough = AdaptiveDriver(
        _settings(report({"a": counts(18)}), max_trials=50), _scenarios(tmp_path, "a"), {}
    )
    assert enough.notices() == []


def test_compare_never_contradicts_a_decision(tmp_path: Path) -> None:
    """Random counts: compare decides every change decided; an unchanged stays in the margin."""
    rng = random.Random(18)  # noqa: S311 - seeded test data
    names = ["a", "b", "c"]
    checked = {"improved": 0, "regressed": 0, "unchanged": 0}
    for _ in range(150):
        # A few designs (each is calibrated once), random counts on both sides.
        sizes = {name: rng.choice([5, 20, 40]) for name in names}
        base = report({n: counts(p := rng.randint(0, k), k - p) for n, k in sizes.items()})
        margin = rng.choice([0.1, 0.35])
        driver = AdaptiveDriver(
            _settings(base, margin=margin, first=rng.choice([2, 6]), max_trials=50),
            _scenarios(tmp_path, *names),
            {},
        )
        head_counts = {
            n: (rng.randint(0, k), k) for n, k in ((n, rng.randint(1, 50)) for n in names)
        }
        head = report({n: counts(p, k - p) for n, (p, k) in head_counts.items()})
        for name in names:
            driver.tracks[name].target = head_counts[name][1]
            driver.observe(name, head.scenarios[name].trials)
        compared = compare_reports(base, head, margin=margin)
        for name in names:
            decision = driver.tracks[name].decision
            verdict = compared.scenarios[name].verdict
            if decision in ("improved", "regressed"):
                checked[decision] += 1
                assert verdict == decision
            elif decision == "unchanged":
                checked["unchanged"] += 1
                assert verdict != "inconclusive"
                low, high = compared.scenarios[name].difference_interval
                assert -margin < low
                assert high < margin
    assert min(checked.values()) >= 5  # every kind of decision was exercised
