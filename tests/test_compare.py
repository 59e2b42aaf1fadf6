"""compare: verdicts, multiplicity control, warnings, JSON and Markdown, exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio
import pytest
from factory import make_project, scenario
from reports import config, counts, report, trials, write
from standin import StandinHost, actions
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, ScenarioResult, compare_reports, run_eval
from atlante_eval.cli import app
from atlante_eval.report import HostSource, summarize
from atlante_eval.report.compare import gate_fails
from atlante_eval.stats import holm_adjust
from atlante_eval.stats.proportions import compare_proportions, fisher_exact_two_sided
from atlante_eval.views.compare_render import render_markdown, render_text


def _invoke(*args: str | Path) -> Result:
    """Run the CLI and make sure no traceback escaped."""
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


# --- verdicts -----------------------------------------------------------------------


def test_a_clear_improvement_is_improved() -> None:
    """2/20 passing before and 18/20 after is an improvement with a positive interval."""
    result = compare_reports(report({"fix": counts(2, 18)}), report({"fix": counts(18, 2)}))
    fix = result.scenarios["fix"]
    assert fix.verdict == "improved"
    assert fix.difference == pytest.approx(0.8)
    assert fix.difference_interval[0] > 0
    assert fix.p_value == pytest.approx(fisher_exact_two_sided(2, 20, 18, 20))
    assert fix.trials_needed is None
    assert result.counts["improved"] == 1


def test_a_clear_regression_is_regressed() -> None:
    """19/20 passing before and 3/20 after is a regression with a negative interval."""
    result = compare_reports(report({"fix": counts(19, 1)}), report({"fix": counts(3, 17)}))
    fix = result.scenarios["fix"]
    assert fix.verdict == "regressed"
    assert fix.difference_interval[1] < 0
    assert result.overall is not None
    assert result.overall.verdict == "regressed"


@pytest.mark.parametrize(
    ("base", "head"),
    [((50, 0), (50, 0)), ((200, 200), (200, 200))],
    ids=["all-pass-50", "half-of-400"],
)
def test_no_change_with_many_trials_is_unchanged(
    base: tuple[int, int], head: tuple[int, int]
) -> None:
    """Equal pass rates over enough trials give an interval inside +/- the margin."""
    result = compare_reports(report({"s": counts(*base)}), report({"s": counts(*head)}))
    s = result.scenarios["s"]
    assert s.verdict == "unchanged"
    assert s.difference_interval[0] > -0.1
    assert s.difference_interval[1] < 0.1
    assert s.trials_needed is None


def test_too_few_trials_is_inconclusive_with_trials_needed() -> None:
    """3/3 against 2/3 decides nothing and says how many graded trials per side would."""
    result = compare_reports(report({"s": counts(3)}), report({"s": counts(2, 1)}))
    s = result.scenarios["s"]
    assert s.verdict == "inconclusive"
    assert s.trials_needed is not None
    assert s.trials_needed > 3
    assert result.counts["inconclusive"] == 1


def test_the_denominator_is_graded_trials() -> None:
    """Infra-errors and skipped trials are counted per side but left out of the pass rate."""
    base = report({"s": counts(4, 1, infra_error=3, skipped_budget=2)})
    head = report({"s": counts(5, 0, infra_error=1)})
    s = compare_reports(base, head).scenarios["s"]
    assert (s.base.passed, s.base.graded, s.base.executed) == (4, 5, 8)
    assert (s.base.infra_errors, s.base.skipped) == (3, 2)
    assert s.base.pass_rate == pytest.approx(0.8)
    assert (s.head.graded, s.head.infra_errors, s.head.skipped) == (5, 1, 0)
    assert s.head.pass_rate == 1.0


def test_a_side_without_graded_trials_is_inconclusive_without_a_number() -> None:
    """A scenario whose trials all hit infra-errors cannot be decided or planned."""
    result = compare_reports(
        report({"a": counts(0, 0, infra_error=3), "b": counts(5)}),
        report({"a": counts(3), "b": counts(5)}),
    )
    a = result.scenarios["a"]
    assert a.verdict == "inconclusive"
    assert a.trials_needed is None
    assert result.settings.family_size == 2  # b and overall; a has nothing to test


def test_overall_is_stratified_over_common_scenarios() -> None:
    """Overall sums the counts of common scenarios but weighs each scenario's rate."""
    base = report({"a": counts(8, 2), "b": counts(5, 5), "gone": counts(1)})
    head = report({"a": counts(9, 1), "b": counts(6, 4, infra_error=1), "new": counts(0, 1)})
    result = compare_reports(base, head)
    assert result.overall is not None
    assert (result.overall.base.passed, result.overall.base.graded) == (13, 20)
    assert (result.overall.head.passed, result.overall.head.graded) == (15, 20)
    assert result.overall.head.infra_errors == 1
    assert result.overall.strata == 2
    assert result.overall.base.pass_rate == pytest.approx(0.65)
    assert result.overall.head.pass_rate == pytest.approx(0.75)


def _merged_baseline() -> tuple[RunReport, RunReport]:
    """BASE a=20/20, b=0/4 (a merged baseline) against HEAD a=4/4, b=0/20."""
    return (
        report({"a": counts(20), "b": counts(0, 4)}),
        report({"a": counts(4), "b": counts(0, 20)}),
    )


def _uneven_infra_errors() -> tuple[RunReport, RunReport]:
    """The same rates, but infra-errors fall on different scenarios in the two runs."""
    return (
        report({"a": counts(10), "b": counts(0, 2, infra_error=8), "c": counts(5, 5)}),
        report({"a": counts(2, 0, infra_error=8), "b": counts(0, 10), "c": counts(5, 5)}),
    )


@pytest.mark.parametrize("example", [_merged_baseline, _uneven_infra_errors])
def test_uneven_trial_counts_give_no_false_overall_change(
    example: Callable[[], tuple[RunReport, RunReport]],
) -> None:
    """No scenario changed, and neither does overall, however the counts are spread."""
    base, head = example()
    result = compare_reports(base, head)
    assert {c.verdict for c in result.scenarios.values()} <= {"inconclusive", "unchanged"}
    assert result.overall is not None
    assert result.overall.verdict in ("inconclusive", "unchanged")
    assert result.overall.difference == pytest.approx(0.0)
    assert not gate_fails(result, "regressed")
    assert result.decided_by == {"regressed": [], "improved": []}


def test_the_gate_passes_a_merged_baseline_through_the_console(tmp_path: Path) -> None:
    """compare --fail-on regressed on the merged-baseline example: exit 0, and it says why."""
    base_report, head_report = _merged_baseline()
    base = write(tmp_path / "base", base_report)
    head = write(tmp_path / "head", head_report.model_copy(update={"run_id": "h"}))
    result = _invoke("compare", base, head, "--fail-on", "regressed", "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["overall"]["verdict"] == "inconclusive"
    assert document["decidedBy"] == {"regressed": [], "improved": []}
    assert "--fail-on regressed: passes" in result.stderr


def test_pooling_the_merged_baseline_would_trip_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The breach the stratified row prevents: pooled raw counts call 20/24 -> 4/24 regressed."""
    from atlante_eval.report import compare as compare_module
    from atlante_eval.stats.stratified import StratifiedComparison, Stratum

    def pooled(strata: list[Stratum], *, confidence: float) -> StratifiedComparison:
        s1, n1 = sum(s.s1 for s in strata), sum(s.n1 for s in strata)
        s2, n2 = sum(s.s2 for s in strata), sum(s.n2 for s in strata)
        raw = compare_proportions(s1, n1, s2, n2, confidence=confidence)
        return StratifiedComparison(
            raw.rate1, raw.rate2, (0.0, 1.0), (0.0, 1.0), raw.difference,
            raw.difference_interval, raw.p_value, len(strata),
        )  # fmt: skip

    monkeypatch.setattr(compare_module, "stratified_comparison", pooled)
    result = compare_reports(*_merged_baseline())
    assert result.overall is not None
    assert result.overall.verdict == "regressed"
    assert gate_fails(result, "regressed")


def test_overall_regression_spread_over_scenarios_trips_the_gate() -> None:
    """Small drops in many scenarios are each inconclusive but regressed overall."""
    names = [f"s{n}" for n in range(5)]
    base = report(dict.fromkeys(names, counts(8, 2)))
    head = report(dict.fromkeys(names, counts(5, 5)))
    result = compare_reports(base, head)
    assert {c.verdict for c in result.scenarios.values()} == {"inconclusive"}
    assert result.overall is not None
    assert result.overall.verdict == "regressed"
    assert result.settings.family_size == 6
    assert gate_fails(result, "regressed")
    assert result.decided_by == {"regressed": ["(overall)"], "improved": []}


def test_headline_and_gate_agree_and_name_the_deciding_row(tmp_path: Path) -> None:
    """The console: the headline shows the overall regression the gate fails on, and says so."""
    names = [f"s{n}" for n in range(5)]
    base = write(tmp_path / "base", report(dict.fromkeys(names, counts(8, 2))))
    head = write(tmp_path / "head", report(dict.fromkeys(names, counts(5, 5)), run_id="h"))
    result = _invoke("compare", base, head, "--fail-on", "regressed")
    assert result.exit_code == 1
    last = result.stdout.rstrip().splitlines()[-1]
    assert last == "0 regressed · 0 improved · 5 inconclusive · overall (stratified): regressed"
    assert (
        "--fail-on regressed: fails (exit 1), decided by the overall row "
        "(stratified over 5 scenarios)" in result.stderr
    )
    markdown = _invoke("compare", base, head, "--markdown", "-", "--fail-on", "regressed")
    assert markdown.stdout.splitlines()[0].endswith("overall (stratified): 🔴 regressed")
    passing = _invoke("compare", base, base, "--fail-on", "regressed")
    assert passing.exit_code == 0
    assert "--fail-on regressed: passes" in passing.stderr


def test_one_scenario_overall_repeats_it() -> None:
    """With one common scenario, overall is that scenario and the family has one test."""
    result = compare_reports(report({"s": counts(2, 18)}), report({"s": counts(18, 2)}))
    assert result.settings.family_size == 1
    assert result.overall is not None
    assert result.overall.adjusted_p == result.scenarios["s"].adjusted_p
    assert result.overall.verdict == result.scenarios["s"].verdict


# --- multiplicity -------------------------------------------------------------------


def _four_moderate_improvements() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    names = [f"s{n}" for n in range(4)]
    return dict.fromkeys(names, counts(2, 18)), dict.fromkeys(names, counts(10, 10))


def test_holm_is_stricter_than_benjamini_hochberg() -> None:
    """Four p ~ 0.014 improvements: Holm keeps only overall, BH and none keep all."""
    base_spec, head_spec = _four_moderate_improvements()
    base, head = report(base_spec), report(head_spec)
    p = fisher_exact_two_sided(2, 20, 10, 20)
    assert 0.0125 < p < 0.05
    holm = compare_reports(base, head, adjust="holm")
    bh = compare_reports(base, head, adjust="bh")
    none = compare_reports(base, head, adjust="none")
    assert {c.verdict for c in holm.scenarios.values()} == {"inconclusive"}
    assert holm.overall is not None
    assert holm.overall.verdict == "improved"
    assert {c.verdict for c in bh.scenarios.values()} == {"improved"}
    assert {c.verdict for c in none.scenarios.values()} == {"improved"}
    overall_p = fisher_exact_two_sided(8, 80, 40, 80)
    expected = holm_adjust([p, p, p, p, overall_p])
    assert holm.scenarios["s0"].adjusted_p == pytest.approx(expected[0])
    assert none.scenarios["s0"].adjusted_p == pytest.approx(p)
    assert (holm.settings.adjust, bh.settings.adjust) == ("holm", "bh")


def test_inconclusive_change_is_planned_at_the_shared_alpha() -> None:
    """A large but unproven change is planned at alpha / family size under Holm."""
    base_spec, head_spec = _four_moderate_improvements()
    holm = compare_reports(report(base_spec), report(head_spec), adjust="holm")
    none = compare_reports(report(base_spec), report(head_spec), adjust="none")
    needed = holm.scenarios["s0"].trials_needed
    assert needed is not None
    assert needed > 20
    assert none.scenarios["s0"].trials_needed is None  # decided: improved


def test_bad_alpha_or_margin_is_refused() -> None:
    """alpha outside (0, 1) and margin outside (0, 1] raise ValueError."""
    with pytest.raises(ValueError, match="alpha"):
        compare_reports(report({}), report({}), alpha=1.0)
    with pytest.raises(ValueError, match="margin"):
        compare_reports(report({}), report({}), margin=0.0)


# --- added, removed, warnings -------------------------------------------------------


def test_added_and_removed_scenarios_are_listed_apart() -> None:
    """Scenarios in only one report are listed as added or removed, not compared."""
    result = compare_reports(
        report({"kept": counts(3), "gone": counts(1, 1)}),
        report({"kept": counts(3), "new": counts(2)}),
    )
    assert list(result.scenarios) == ["kept"]
    assert list(result.added) == ["new"]
    assert result.added["new"].passed == 2
    assert list(result.removed) == ["gone"]
    assert result.removed["gone"].graded == 2
    assert (result.counts["added"], result.counts["removed"]) == (1, 1)


def test_no_common_scenario_has_no_overall() -> None:
    """Two reports without a common scenario compare to nothing, with no overall."""
    result = compare_reports(report({"a": counts(1)}), report({"b": counts(1)}))
    assert result.scenarios == {}
    assert result.overall is None
    assert result.settings.family_size == 0
    assert "(no scenario in both reports)" in render_text(result)


def _codes(result_warnings: list[object]) -> list[str]:
    return [w.code for w in result_warnings]  # type: ignore[attr-defined]


def test_warnings_name_differing_host_model_and_budget() -> None:
    """Host, host version, model and budget differences are warned about, not refused."""
    base = report({"s": counts(3)})
    head = report(
        {"s": counts(3)},
        host="claude-code",
        host_version="2.0.0",
        model="openai/gpt-5",
        config=config(timeout_ms=60_000, max_tokens=1000, trials=3),
    )
    result = compare_reports(base, head)
    codes = _codes(list(result.warnings))
    assert codes.count("compare-host-differs") == 1
    assert codes.count("compare-host-version-differs") == 1
    assert "compare-model-differs" in codes
    assert codes.count("compare-budget-differs") == 2  # timeoutMs and maxTokens, not trials
    budget = [w for w in result.warnings if w.code == "compare-budget-differs"]
    assert "timeoutMs" in budget[0].message
    assert (budget[0].base, budget[0].head) == ("600000", "60000")
    assert result.scenarios["s"].verdict == "inconclusive"


def test_a_host_version_change_says_where_each_host_came_from() -> None:
    """compare-host-version-differs names both versions and whether each was pinned."""
    managed = HostSource(kind="managed", package="opencode-ai@1.2.3", integrity="sha512-a")
    base = report({"s": counts(3)}, host_source=managed)
    head = report({"s": counts(3)}, host_version="1.2.4", host_source=HostSource(kind="path"))
    [warned] = [w for w in compare_reports(base, head).warnings if "host" in w.code]
    assert warned.code == "compare-host-version-differs"
    assert warned.message == (
        "the runs differ in host version: BASE '1.2.3' (managed), HEAD '1.2.4' (path)"
    )
    assert (warned.base, warned.head) == ("1.2.3", "1.2.4")
    same = report({"s": counts(3)}, host_source=HostSource(kind="path"))
    assert not [w for w in compare_reports(base, same).warnings if "host" in w.code]


def _fingerprinted(fingerprint: str) -> ScenarioResult:
    return summarize(trials(counts(30)), fingerprint=fingerprint)


def test_changed_scenario_fingerprint_is_warned_when_nothing_else_differs() -> None:
    """Same harness, host, model and budget: a differing fingerprint means the scenario changed."""
    base = report({"s": _fingerprinted("1" * 64), "t": _fingerprinted("3" * 64)})
    head = report({"s": _fingerprinted("2" * 64), "t": _fingerprinted("3" * 64)})
    result = compare_reports(base, head)
    changed = [w for w in result.warnings if w.code == "compare-scenario-changed"]
    assert len(changed) == 1
    assert changed[0].message.endswith(": s")
    assert result.harness_changed is False


def test_fingerprint_difference_is_expected_when_the_harness_changed() -> None:
    """Fingerprints cover the harness, so a new manifest digest explains them: no warning."""
    base = report({"s": _fingerprinted("1" * 64)})
    head = report({"s": _fingerprinted("2" * 64)}, manifest_digest="b" * 64)
    result = compare_reports(base, head)
    assert result.warnings == []
    assert result.harness_changed is True


def test_changed_definition_is_warned_even_when_the_harness_changed() -> None:
    """The definition digest covers only the scenario, so its change is flagged across harnesses."""
    base = report({"s": _defined("1" * 64), "t": _defined("3" * 64)})
    head = report({"s": _defined("2" * 64), "t": _defined("3" * 64)}, manifest_digest="b" * 64)
    result = compare_reports(base, head)
    changed = [w for w in result.warnings if w.code == "compare-scenario-changed"]
    assert [w.message.rsplit(": ", 1)[1] for w in changed] == ["s"]
    assert result.harness_changed is True


def test_same_definition_is_not_warned_about_when_the_harness_changed() -> None:
    """Equal definition digests under a new harness raise no scenario warning."""
    base = report({"s": _defined("1" * 64)})
    head = report({"s": _defined("1" * 64)}, manifest_digest="b" * 64)
    assert compare_reports(base, head).warnings == []


def _defined(digest: str) -> ScenarioResult:
    return _fingerprinted("9" * 64).model_copy(update={"definition": digest})


def test_partial_and_shard_reports_are_warned_about() -> None:
    """An interrupted run or a single shard is compared but flagged."""
    result = compare_reports(
        report({"s": counts(30)}, interrupted=True), report({"s": counts(30)}, shard="1/2")
    )
    assert _codes(list(result.warnings)) == ["compare-partial-report", "compare-shard-report"]


# --- output -------------------------------------------------------------------------


def test_json_shape_is_stable(tmp_path: Path) -> None:
    """--json prints the documented keys at every level, nulls included."""
    base = write(tmp_path / "base", report({"a": counts(3), "gone": counts(1)}))
    head = write(tmp_path / "head", report({"a": counts(2, 1), "new": counts(1)}, run_id="h"))
    result = _invoke("compare", base, head, "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert list(doc) == [
        "formatVersion", "base", "head", "harnessChanged", "settings", "scenarios",
        "overall", "added", "removed", "counts", "warnings", "decidedBy", "behaviour",
    ]  # fmt: skip
    assert doc["formatVersion"] == 1
    assert list(doc["behaviour"]) == ["alpha", "baseDir", "headDir", "scenarios"]
    assert list(doc["behaviour"]["scenarios"]) == ["a"]
    assert list(doc["behaviour"]["scenarios"]["a"]) == [
        "verdict", "base", "head", "checks", "usage", "paths", "effort", "probableCause", "notes",
    ]  # fmt: skip
    assert list(doc["base"]) == [
        "path", "runId", "host", "hostVersion", "model", "manifestDigest", "startedAt", "trials",
    ]  # fmt: skip
    assert doc["base"]["path"] == str(base / "report.json")
    assert doc["head"]["runId"] == "h"
    assert doc["settings"] == {
        "alpha": 0.05, "margin": 0.1, "confidence": 0.95, "adjust": "holm",
        "familySize": 1, "power": 0.8, "denominator": "graded",
    }  # fmt: skip
    a = doc["scenarios"]["a"]
    assert list(a) == [
        "base", "head", "difference", "differenceInterval", "pValue", "adjustedP",
        "verdict", "trialsNeeded", "strata",
    ]  # fmt: skip
    assert a["strata"] is None
    assert doc["overall"]["strata"] == 1
    assert doc["decidedBy"] == {"regressed": [], "improved": []}
    assert list(a["base"]) == [
        "passed", "graded", "executed", "infraErrors", "skipped", "passRate", "interval",
    ]  # fmt: skip
    assert a["verdict"] == "inconclusive"
    assert isinstance(a["trialsNeeded"], int)
    assert doc["overall"]["verdict"] == "inconclusive"
    assert list(doc["added"]) == ["new"]
    assert list(doc["removed"]) == ["gone"]
    assert doc["counts"] == {
        "improved": 0, "regressed": 0, "unchanged": 0, "inconclusive": 1,
        "added": 1, "removed": 1,
    }  # fmt: skip
    # Three trials per side cannot detect anything, and compare says so.
    assert [w["code"] for w in doc["warnings"]] == ["compare-underpowered"]


def test_json_carries_warnings_and_stderr_shows_them(tmp_path: Path) -> None:
    """A differing model appears in the JSON warnings and as a warning diagnostic on stderr."""
    base = write(tmp_path / "base", report({"a": counts(30)}))
    head = write(tmp_path / "head", report({"a": counts(30)}, model="other/model"))
    result = _invoke("compare", base, head, "--json")
    doc = json.loads(result.stdout)
    assert doc["warnings"] == [
        {
            "code": "compare-model-differs",
            "message": "the runs differ in model: BASE 'anthropic/claude-sonnet-4', "
            "HEAD 'other/model'",
            "base": "anthropic/claude-sonnet-4",
            "head": "other/model",
        }
    ]
    assert result.stderr.startswith("warning [compare-model-differs]: the runs differ in model")
    assert "next: compare runs of the same model" in result.stderr


def test_terminal_table_states_the_denominator(tmp_path: Path) -> None:
    """The plain table names the denominator, every scenario, overall and the counts."""
    base = write(tmp_path / "base", report({"up": counts(2, 18), "flat": counts(5)}))
    head = write(tmp_path / "head", report({"up": counts(18, 2), "flat": counts(5)}))
    result = _invoke("compare", base, head)
    assert result.exit_code == 0
    out = result.stdout
    assert "pass rate = passed / graded trials (graded = executed minus infra-errors" in out
    assert "\x1b[" not in out  # piped: no colour
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert rows["up"].endswith("improved")
    assert "2/20 10%" in rows["up"]
    assert "18/20 90%" in rows["up"]
    assert "inconclusive (~" in rows["flat"]
    assert "overall (stratified)" in rows["overall"]
    assert out.rstrip().endswith(
        "0 regressed · 1 improved · 1 inconclusive · overall (stratified): improved"
    )


def test_markdown_file_is_a_github_table(tmp_path: Path) -> None:
    """--markdown writes a table with a row per scenario, overall, notes and warnings."""
    base = write(tmp_path / "base", report({"a|b": counts(19, 1), "c": counts(3)}))
    head = write(
        tmp_path / "head",
        report({"a|b": counts(3, 17, infra_error=2), "c": counts(3)}, host_version="9.9.9"),
    )
    summary = tmp_path / "summary.md"
    result = _invoke("compare", base, head, "--markdown", summary)
    assert result.exit_code == 0
    text = summary.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert (
        lines[0] == "### atlante-eval compare: 🔴 1 regressed · 🟢 0 improved · 🟡 1 inconclusive"
        " · overall (stratified): 🔴 regressed"
    )
    assert "host `opencode 1.2.3` → `opencode 9.9.9`" in lines[2]
    assert "| Scenario | BASE | HEAD | Change (95% CI) | p (Holm) | Verdict |" in lines
    row = next(line for line in lines if line.startswith("| `a\\|b`"))
    assert row.count(" | ") == 5
    assert "3/20 · 15%" in row
    assert "(2 infra-errors)" in row
    assert row.endswith("🔴 regressed |")
    assert any(line.startswith("| **overall (stratified)** |") for line in lines)
    assert "Pass rate = passed / graded trials" in text
    assert "> **Warning** `compare-host-version-differs`" in text
    assert text.endswith("\n")
    assert not list(tmp_path.glob(".summary.md.*"))
    assert "SCENARIO" in result.stdout  # the table still goes to stdout


def test_markdown_dash_prints_it_instead_of_the_table(tmp_path: Path) -> None:
    """--markdown - prints the Markdown on stdout; with --json it is refused."""
    base = write(tmp_path / "base", report({"a": counts(3)}))
    result = _invoke("compare", base, base, "--markdown", "-")
    assert result.stdout.startswith("### atlante-eval compare:")
    refused = _invoke("compare", base, base, "--markdown", "-", "--json")
    assert refused.exit_code == 2
    assert "error [invalid-option]" in refused.stderr


# --- exit codes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "head", "fail_on", "code"),
    [
        (counts(19, 1), counts(3, 17), "regressed", 1),
        (counts(19, 1), counts(3, 17), None, 0),
        (counts(3, 17), counts(19, 1), "regressed", 0),
        (counts(3, 17), counts(19, 1), "any-change", 1),
        (counts(3), counts(2, 1), "any-change", 0),
    ],
    ids=["regressed", "no-gate", "improved", "any-change", "inconclusive"],
)
def test_fail_on_exit_codes(
    tmp_path: Path, base: list[str], head: list[str], fail_on: str | None, code: int
) -> None:
    """--fail-on regressed exits 1 only on a regression; any-change also on an improvement."""
    b = write(tmp_path / "b", report({"s": base}))
    h = write(tmp_path / "h", report({"s": head}))
    args: list[str | Path] = ["compare", b, h]
    if fail_on:
        args += ["--fail-on", fail_on]
    assert _invoke(*args).exit_code == code


@pytest.mark.parametrize(
    ("option", "value"),
    [("--alpha", "0"), ("--alpha", "1"), ("--alpha", "x"), ("--margin", "0"), ("--margin", "1.5")],
)
def test_invalid_numbers_exit_2(tmp_path: Path, option: str, value: str) -> None:
    """--alpha outside (0, 1) or --margin outside (0, 1] is an invalid-option (exit 2)."""
    b = write(tmp_path / "b", report({"s": counts(1)}))
    result = _invoke("compare", b, b, option, value)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error [invalid-option]: {option} must be a number")


def test_margin_and_alpha_change_the_rule(tmp_path: Path) -> None:
    """A wider margin turns a near-tie into unchanged; the settings echo both values."""
    b = write(tmp_path / "b", report({"s": counts(45, 5)}))
    h = write(tmp_path / "h", report({"s": counts(45, 5)}))
    strict = json.loads(_invoke("compare", b, h, "--json").stdout)
    loose = json.loads(
        _invoke("compare", b, h, "--json", "--margin", "0.2", "--alpha", "0.1").stdout
    )
    assert strict["scenarios"]["s"]["verdict"] == "inconclusive"
    assert loose["scenarios"]["s"]["verdict"] == "unchanged"
    assert (loose["settings"]["margin"], loose["settings"]["alpha"]) == (0.2, 0.1)
    assert loose["settings"]["confidence"] == pytest.approx(0.9)


def test_unreadable_report_exits_2(tmp_path: Path) -> None:
    """A missing BASE is report-unreadable (exit 2) and nothing goes to stdout."""
    h = write(tmp_path / "h", report({"s": counts(1)}))
    result = _invoke("compare", tmp_path / "missing", h)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error [report-unreadable]: no report at ")


def test_markdown_in_a_missing_directory_is_refused_first(tmp_path: Path) -> None:
    """A Markdown path in a missing directory is invalid-output-path (exit 2), up front."""
    b = write(tmp_path / "b", report({"s": counts(1)}))
    result = _invoke("compare", b, b, "--markdown", tmp_path / "no" / "dir" / "x.md")
    assert result.exit_code == 2
    assert "error [invalid-output-path]: --markdown" in result.stderr


def test_markdown_render_without_warnings_has_no_warning_lines() -> None:
    """A clean comparison's Markdown has no warning block."""
    text = render_markdown(compare_reports(report({"s": counts(30)}), report({"s": counts(30)})))
    assert "Warning" not in text


def test_too_few_trials_to_detect_anything_are_warned_about(tmp_path: Path) -> None:
    """3 trials per side: not even 100% -> 0% is detectable; the warning says what would be."""
    base = write(tmp_path / "base", report({"a": counts(3), "b": counts(3)}))
    head = write(tmp_path / "head", report({"a": counts(0, 3), "b": counts(3)}, run_id="h"))
    result = _invoke("compare", base, head)
    assert result.stdout.splitlines()[-1].startswith("0 regressed")
    assert "warning [compare-underpowered]: with 3 graded trials per side (2 of 2 scenarios)" in (
        result.stderr
    )
    assert "cannot detect any drop, not even 100% -> 0%" in result.stderr
    assert "at least 29 per side are needed to detect a 30-point drop" in result.stderr
    assert "next: run more trials per scenario (--trials)" in result.stderr
    enough = compare_reports(report({"a": counts(30)}), report({"a": counts(30)}))
    assert [w.code for w in enough.warnings] == []


def test_infra_error_rates_that_differ_are_warned_about() -> None:
    """1 infra-error in 40 trials against 15: flagged; the same rate on both sides: not."""
    base = report({"a": counts(20, infra_error=1), "b": counts(19)})
    head = report({"a": counts(10, infra_error=10), "b": counts(15, infra_error=5)})
    codes = [w.code for w in compare_reports(base, head).warnings]
    assert "compare-infra-differs" in codes
    same = compare_reports(base, report({"a": counts(20, infra_error=1), "b": counts(19)}))
    assert "compare-infra-differs" not in [w.code for w in same.warnings]


def test_compares_two_real_runs(tmp_path: Path) -> None:
    """Reports published by real stand-in runs load and compare end to end."""
    good = actions({"write": "out.txt", "content": "x"}, {"usage": 10, "cost": 0.001})
    bad = actions({"usage": 10})
    check = [{"type": "file-exists", "path": "out.txt"}]
    out = tmp_path / "reports"
    paths = []
    for label, prompt in (("base", good), ("head", bad)):
        root = make_project(
            tmp_path / label, scenarios=[scenario("task", prompt=prompt, checks=check)]
        )
        published = anyio.run(partial(run_eval, root, host=StandinHost(), trials=3, out=out))
        paths.append(out / published.run_id)
    result = _invoke("compare", *paths, "--json", "--fail-on", "regressed")
    doc = json.loads(result.stdout)
    task = doc["scenarios"]["task"]
    assert (task["base"]["passed"], task["head"]["passed"], task["head"]["graded"]) == (3, 0, 3)
    assert task["verdict"] == "inconclusive"  # 3 trials a side cannot prove it
    assert task["trialsNeeded"] > 3
    assert result.exit_code == 0
    assert doc["base"]["host"] == "standin"
