"""``run --against BASE --until-decided``: waves, decisions, budgets, resume (stand-in host)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from adaptivekit import adaptive_project, baseline, chance_scenario, decisions, interrupted_run
from standin import StandinHost
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, hosts, run_eval
from atlante_eval.cli import app
from atlante_eval.trial import process as process_module


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put run roots under the test's own temporary directory."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


@pytest.fixture(autouse=True)
def standin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the configured host the stand-in."""
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    monkeypatch.setenv("NO_COLOR", "1")


def invoke(*args: str) -> Result:
    """Run ``atlante-eval ARGS``; never a traceback."""
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def published(project: Path) -> RunReport:
    """The one report published under the project."""
    (path,) = sorted((project / ".atlante" / "eval").glob("*/report.json"))
    return RunReport.model_validate_json(path.read_text())


def indices(report: RunReport, name: str) -> list[int]:
    return [t.i for t in report.scenarios[name].trials]


def adaptive_args(project: Path, base: Path, *extra: str) -> list[str]:
    return ["run", str(project), "--against", str(base), "--until-decided", "-j", "2", *extra]


def test_flip_stops_early_as_regressed_and_steady_as_unchanged(tmp_path: Path) -> None:
    """A 100% -> 0% flip is regressed after a few trials; a steady one unchanged; new runs once."""
    project = adaptive_project(
        tmp_path / "p",
        [
            chance_scenario("flip", 0.0),
            chance_scenario("steady", 1.0),
            chance_scenario("fresh", 1.0),
        ],
        maxSessions=100,
    )
    base = baseline(tmp_path / "base" / "report.json", {"flip": (6, 6), "steady": (40, 40)})
    result = invoke(
        *adaptive_args(project, base, "--min-trials", "4", "--max-trials", "20", "--margin", "0.35")
    )
    assert result.exit_code == 1, result.stderr
    report = published(project)
    record = report.adaptive
    assert record is not None
    assert record.looks == [4, 6, 9, 14, 20]
    assert record.family_size == 3  # two compared scenarios plus the stratified overall row
    assert record.method == "exact-pocock"
    flip, steady, fresh = (record.scenarios[n] for n in ("flip", "steady", "fresh"))
    # The exactly calibrated design decides a sure flip at the first look.
    assert (flip.decision, flip.stopped, flip.trials) == ("regressed", "decided", 4)
    assert [look.trials for look in flip.looks] == [4]
    assert flip.critical_p is not None
    assert flip.looks[0].p_value <= flip.critical_p
    assert flip.looks[0].adjusted_p <= 0.05
    assert (steady.decision, steady.stopped) == ("unchanged", "decided")
    assert steady.trials < 20
    assert (fresh.decision, fresh.stopped, fresh.trials) == ("new", "fixed-count", 2)
    assert fresh.baseline_graded is None
    # Every trial is kept, in plan order per scenario.
    assert indices(report, "flip") == list(range(4))
    assert indices(report, "steady") == list(range(steady.trials))
    assert {t.verdict for t in report.scenarios["flip"].trials} == {"fail"}
    assert record.trials_used == 4 + steady.trials + 2
    assert record.fixed_trials == record.fixed_per_scenario * 3
    assert record.saving == record.fixed_trials - record.trials_used
    assert record.compare_agrees is True
    assert flip.compare_verdict == "regressed"
    assert steady.compare_verdict == "unchanged"
    # Progress: each look's estimate and interval; the summary: decisions and saving.
    assert "flip: look at 4 trials · 0% vs base 100% · -100.0 [" in result.stderr
    assert "regressed (decided)" in result.stderr
    assert "inconclusive (continues)" in result.stderr
    assert "  flip: regressed after 4 trials (decided)" in result.stdout
    assert record.overall is not None  # the stratified overall row, as compare has it
    assert "overall (stratified over 2 scenarios)" in result.stdout
    assert f"trials used {record.trials_used} · a fixed-count run" in result.stdout
    assert f"saving {record.saving}" in result.stdout
    assert "compare on the final counts agrees with every decision" in result.stdout
    # compare of the finished run against the same baseline agrees.
    compared = invoke(
        "compare", str(base), str(published_path(project)), "--margin", "0.35", "--json"
    )
    document = json.loads(compared.stdout)
    assert document["scenarios"]["flip"]["verdict"] == "regressed"
    assert document["scenarios"]["steady"]["verdict"] == "unchanged"
    assert document["added"].keys() == {"fresh"}
    assert all(w["code"] != "compare-adaptive-differs" for w in document["warnings"])
    # The adaptive summary's overall row is compare's stratified row, number for number.
    overall = document["overall"]
    assert record.overall.verdict == overall["verdict"]
    assert record.overall.difference == pytest.approx(overall["difference"])
    assert list(record.overall.interval) == pytest.approx(overall["differenceInterval"])
    assert record.overall.scenarios == overall["strata"] == 2


def published_path(project: Path) -> Path:
    (path,) = sorted((project / ".atlante" / "eval").glob("*/report.json"))
    return path


def test_undecided_scenario_runs_to_max_trials_and_compare_explains(tmp_path: Path) -> None:
    """6/12 against 17/20 stays open over 4 looks; compare's one look says regressed, and why."""
    project = adaptive_project(
        tmp_path / "p", [chance_scenario("coin", 0.5, seed=5)], maxSessions=100
    )
    base = baseline(tmp_path / "base.json", {"coin": (17, 20)})
    result = invoke(*adaptive_args(project, base, "--min-trials", "4", "--max-trials", "12"))
    assert result.exit_code == 1, result.stderr
    record = published(project).adaptive
    assert record is not None
    coin = record.scenarios["coin"]
    assert (coin.decision, coin.stopped, coin.trials) == ("inconclusive", "max-trials", 12)
    assert [look.trials for look in coin.looks] == [4, 6, 9, 12]
    assert all(look.decidable is not None for look in coin.looks[:-1])
    assert coin.compare_verdict == "regressed"
    assert record.compare_agrees is False
    assert "compare on the final counts differs on coin (compare: regressed)" in result.stdout
    compared = invoke("compare", str(base), str(published_path(project)))
    assert "compare-adaptive-differs" in compared.stderr
    assert "coin (run: inconclusive, compare: regressed)" in compared.stderr


def test_seeded_coin_against_an_equal_baseline_stops_undecidable(tmp_path: Path) -> None:
    """A coin against a 50% baseline cannot become a decision: it stops at the first look."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("coin", 0.5)], maxSessions=100)
    base = baseline(tmp_path / "base.json", {"coin": (10, 20)})
    result = invoke(*adaptive_args(project, base, "--min-trials", "3", "--max-trials", "7"))
    assert result.exit_code == 1, result.stderr
    report = published(project)
    assert report.adaptive is not None
    coin = report.adaptive.scenarios["coin"]
    assert (coin.decision, coin.stopped, coin.trials) == ("inconclusive", "undecidable", 3)
    assert coin.looks[0].decidable is not None
    assert coin.looks[0].decidable < 0.05
    assert "coin: inconclusive after 3 trials (undecidable within 7 trials)" in result.stdout
    assert "stops: undecidable within 7 trials" in result.stderr
    verdicts = [t.verdict for t in report.scenarios["coin"].trials]
    assert "pass" in verdicts
    assert "fail" in verdicts


def test_session_budget_exhaustion_ends_with_skipped_trials(tmp_path: Path) -> None:
    """maxSessions runs out in the second wave: its rest is skipped-budget and the run stops."""
    project = adaptive_project(
        tmp_path / "p",
        [chance_scenario("coin", 0.5), chance_scenario("other", 0.5, seed=3)],
        maxSessions=10,
    )
    # Both drop from their baseline and stay undecided after the first wave.
    base = baseline(tmp_path / "base.json", {"coin": (18, 20), "other": (17, 20)})
    result = invoke(*adaptive_args(project, base, "--min-trials", "4", "--max-trials", "20"))
    assert result.exit_code == 1, result.stderr
    report = published(project)
    record = report.adaptive
    assert record is not None
    verdicts = [t.verdict for t in report.all_trials()]
    assert verdicts.count("skipped-budget") == 2
    assert len(verdicts) - verdicts.count("skipped-budget") == 10
    assert {s.stopped for s in record.scenarios.values()} == {"max-sessions"}
    assert record.trials_used == 10
    assert "skipped-budget" in result.stdout


def test_max_cost_stops_adding_waves(tmp_path: Path) -> None:
    """Once the host-reported cost reaches --max-cost, no further wave starts."""
    project = adaptive_project(
        tmp_path / "p", [chance_scenario("coin", 0.5, cost=0.01)], maxSessions=100
    )
    base = baseline(tmp_path / "base.json", {"coin": (16, 20)})
    result = invoke(
        *adaptive_args(
            project, base, "--min-trials", "4", "--max-trials", "20", "--max-cost", "0.05"
        )
    )
    assert result.exit_code == 1, result.stderr
    record = published(project).adaptive
    assert record is not None
    coin = record.scenarios["coin"]
    assert (coin.stopped, coin.trials) == ("max-cost", 6)
    assert record.cost == pytest.approx(0.06)
    assert record.max_cost == pytest.approx(0.05)
    assert "of --max-cost $0.05" in result.stdout


def test_max_cost_without_reported_cost_warns(tmp_path: Path) -> None:
    """A host that reports no cost cannot be held to --max-cost: the run says so."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("steady", 1.0)], maxSessions=100)
    base = baseline(tmp_path / "base.json", {"steady": (6, 6)})
    result = invoke(
        *adaptive_args(project, base, "--min-trials", "2", "--max-trials", "3", "--max-cost", "1")
    )
    assert "adaptive-cost-unknown" in result.stderr
    assert published(project).adaptive is not None


def test_changed_and_missing_scenarios_are_flagged(tmp_path: Path) -> None:
    """A scenario whose definition digest differs from BASE's is flagged; a missing one is new."""
    project = adaptive_project(
        tmp_path / "p",
        [chance_scenario("flip", 0.0), chance_scenario("fresh", 1.0)],
        maxSessions=100,
    )
    base = baseline(
        tmp_path / "base.json", {"flip": (6, 6)}, definitions={"flip": "sha256:" + "0" * 64}
    )
    result = invoke(*adaptive_args(project, base, "--min-trials", "6", "--max-trials", "9"))
    assert "adaptive-scenario-changed" in result.stderr
    record = published(project).adaptive
    assert record is not None
    assert record.scenarios["flip"].changed is True
    assert record.scenarios["fresh"].decision == "new"
    assert "definition changed since the baseline" in result.stdout


def test_baseline_without_common_scenarios_warns_and_runs_the_fixed_count(tmp_path: Path) -> None:
    """Nothing to compare with: every scenario runs the configured trials as new."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("fresh", 1.0)], maxSessions=100)
    base = baseline(tmp_path / "base.json", {"other": (3, 3)})
    result = invoke(*adaptive_args(project, base))
    assert result.exit_code == 0, result.stderr
    assert "adaptive-baseline-mismatch" in result.stderr
    assert indices(published(project), "fresh") == [0, 1]


def _bad(tmp_path: Path) -> dict[str, list[str]]:
    base = baseline(tmp_path / "base.json", {"flip": (3, 3)})
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json", encoding="utf-8")
    adaptive = ["--until-decided", "--against", str(base)]
    return {
        "needs --against": ["--until-decided"],
        "only used by adaptive runs": ["--against", str(base)],
        "only apply to adaptive runs": ["--max-trials", "10"],
        "no report at": ["--until-decided", "--against", str(tmp_path / "missing.json")],
        "is not valid JSON": ["--until-decided", "--against", str(garbage)],
        "cannot be combined with --shard": [*adaptive, "--shard", "1/2"],
        "is above --max-trials 4": [*adaptive, "--min-trials", "9", "--max-trials", "4"],
        "--max-trials must be an integer from 1 to 50": [*adaptive, "--max-trials", "51"],
        "--margin must be a number above 0": [*adaptive, "--margin", "0"],
        "--alpha must be a number above 0 and below 1": [*adaptive, "--alpha", "1"],
        "--max-cost must be a number above 0": [*adaptive, "--max-cost", "nan"],
        "--margin only apply": ["--margin", "0.2"],
    }


@pytest.mark.parametrize(
    "expected",
    [
        "needs --against",
        "only used by adaptive runs",
        "only apply to adaptive runs",
        "no report at",
        "is not valid JSON",
        "cannot be combined with --shard",
        "is above --max-trials 4",
        "--max-trials must be an integer from 1 to 50",
        "--margin must be a number above 0",
        "--alpha must be a number above 0 and below 1",
        "--max-cost must be a number above 0",
        "--margin only apply",
    ],
)
def test_bad_adaptive_options_exit_2_before_any_trial(tmp_path: Path, expected: str) -> None:
    """Each wrong combination or value is a diagnostic with exit status 2; nothing runs."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("flip", 0.0)])
    result = invoke("run", str(project), *_bad(tmp_path)[expected])
    assert result.exit_code == 2, result.stdout + result.stderr
    assert expected in " ".join(result.stderr.split())
    assert not (project / ".atlante" / "eval").exists() or not any(
        (project / ".atlante" / "eval").glob("*/report.json")
    )


def test_resume_of_an_interrupted_adaptive_run_reaches_the_samedecisions(tmp_path: Path) -> None:
    """Interrupted in its second wave, then resumed: the same looks and decisions as one run."""
    docs = [chance_scenario("coin", 0.5, seed=3), chance_scenario("flip", 0.0)]
    project = adaptive_project(tmp_path / "p", docs, maxSessions=100)
    # The flip is decided at the first look (3 trials); the coin goes on to 5 and 8.
    base = baseline(tmp_path / "base.json", {"coin": (16, 20), "flip": (6, 6)})
    settings: dict[str, Any] = {
        "against": base,
        "until_decided": True,
        "min_trials": 3,
        "max_trials": 9,
    }
    whole = anyio.run(lambda: run_eval(project, jobs=1, out=tmp_path / "whole", **settings))
    # the second wave (the coin's trials 4 and 5) is under way after 7 trials
    failure = interrupted_run(project, settings, after=7, out=tmp_path / "cut")
    assert failure.report.adaptive is not None
    assert "interrupted" in {s.stopped for s in failure.report.adaptive.scenarios.values()}
    resumed = anyio.run(
        lambda: run_eval(
            project, jobs=1, out=tmp_path / "resumed", resume=failure.report_path.parent, **settings
        )
    )
    assert decisions(resumed) == decisions(whole)
    assert any(t.reused for t in resumed.all_trials())
    assert resumed.meta.resumed_from == str(failure.report_path.parent)


def test_a_merged_sharded_report_is_a_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BASE is this tool's merged shards; the harness (here the pass rate) changes, not the task."""
    doc = chance_scenario("flip", 0.0)
    doc["task"]["prompt"] = doc["task"]["prompt"].replace("0.0", '"env:STANDIN_RATE"')
    project = adaptive_project(tmp_path / "p", [doc], maxSessions=100)
    monkeypatch.setenv("STANDIN_RATE", "1")
    shards = []
    for index in (1, 2):
        fixed = ["run", str(project), "--trials", "8", "--shard", f"{index}/2"]
        shard = invoke(*fixed, "--pass-env", "STANDIN_RATE", "--out", str(tmp_path / "shards"))
        assert shard.exit_code == 0, shard.stderr
    shards = sorted((tmp_path / "shards").glob("*/report.json"))
    merged = invoke("merge", *map(str, shards), "-o", str(tmp_path / "base.json"))
    assert merged.exit_code == 0, merged.stderr
    monkeypatch.setenv("STANDIN_RATE", "0")
    result = invoke(
        *adaptive_args(project, tmp_path / "base.json", "--min-trials", "3", "--max-trials", "9"),
        "--pass-env",
        "STANDIN_RATE",
    )
    assert result.exit_code == 1, result.stderr
    assert "adaptive-scenario-changed" not in result.stderr
    record = published(project).adaptive
    assert record is not None
    flip = record.scenarios["flip"]
    assert (flip.baseline_passed, flip.baseline_graded) == (8, 8)
    assert (flip.decision, flip.stopped) == ("regressed", "decided")
    assert flip.trials < 9
    assert flip.changed is None


def test_a_failing_decision_record_never_costs_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the record cannot be built, the trials are still published (without it)."""
    from atlante_eval.run.adaptive import AdaptiveDriver

    def broken(self: AdaptiveDriver, report: RunReport) -> None:
        raise RuntimeError("record bug")

    monkeypatch.setattr(AdaptiveDriver, "record", broken)
    project = adaptive_project(tmp_path / "p", [chance_scenario("flip", 0.0)], maxSessions=100)
    base = baseline(tmp_path / "base.json", {"flip": (6, 6)})
    result = invoke(*adaptive_args(project, base, "--min-trials", "2", "--max-trials", "3"))
    assert result.exit_code == 1, result.stderr
    report = published(project)
    assert report.adaptive is None
    ran = len(report.scenarios["flip"].trials)
    assert ran >= 2
    assert indices(report, "flip") == list(range(ran))


def test_a_wave_the_budget_skips_entirely_takes_no_look(tmp_path: Path) -> None:
    """maxSessions 2: the new scenario never runs (new, max-sessions) and no empty look is taken."""
    project = adaptive_project(
        tmp_path / "p",
        [chance_scenario("a-coin", 0.5), chance_scenario("b-fresh", 1.0)],
        maxSessions=2,
    )
    base = baseline(tmp_path / "base.json", {"a-coin": (16, 20)})
    result = invoke(*adaptive_args(project, base, "--min-trials", "2", "--max-trials", "6"))
    assert result.exit_code == 1, result.stderr
    report = published(project)
    record = report.adaptive
    assert record is not None
    fresh, coin = record.scenarios["b-fresh"], record.scenarios["a-coin"]
    assert (fresh.decision, fresh.stopped, fresh.trials, fresh.looks) == (
        "new",
        "max-sessions",
        0,
        [],
    )
    assert [t.verdict for t in report.scenarios["b-fresh"].trials] == ["skipped-budget"] * 2
    assert [look.trials for look in coin.looks] == [2]
    assert coin.stopped == "max-sessions"


def test_a_baseline_of_thousands_of_trials_is_thinned_for_the_design(tmp_path: Path) -> None:
    """A 5,000-trial baseline: the design judges against its first 200 graded trials (its
    exact path counts would overflow a float beyond about 1,000), says so, and decides."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("flip", 0.0)], maxSessions=100)
    base = baseline(tmp_path / "base" / "report.json", {"flip": (5000, 5000)})
    result = invoke(*adaptive_args(project, base, "--min-trials", "4", "--max-trials", "20"))
    assert result.exit_code == 1, result.stderr
    assert "warning [adaptive-baseline-thinned]" in result.stderr
    assert "flip (5000)" in result.stderr
    record = published(project).adaptive
    assert record is not None
    flip = record.scenarios["flip"]
    assert (flip.decision, flip.stopped) == ("regressed", "decided")
    assert flip.baseline_graded == 200
    assert flip.trials < 20
