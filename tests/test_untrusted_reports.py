"""Untrusted report inputs: forged and inconsistent baselines are refused before anything runs.

Each forgery is tried twice: against a weakened engine (stored ``stats`` trusted, no
consistency check: the code before issue 23), where it changes the outcome, which
proves the test sees the attack; and against the engine as it is, where ``compare``
and ``run --against`` refuse it with ``report-unreadable`` (exit 2) before any trial.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from adaptivekit import adaptive_project, baseline, chance_scenario
from reports import counts, report
from standin import StandinHost
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, hosts
from atlante_eval.cli import app
from atlante_eval.report import ScenarioResult
from atlante_eval.report import compare as compare_module
from atlante_eval.report.compare import compare_report_files
from atlante_eval.report.models import ScenarioStatistics
from atlante_eval.run import adaptive as adaptive_module
from atlante_eval.trial import process as process_module

#: Every stand-in host the CLI made in this test (their sessions are counted).
MADE: list[StandinHost] = []


def _make_standin(binary: str | None = None) -> StandinHost:
    host = StandinHost()
    MADE.append(host)
    return host


@pytest.fixture(autouse=True)
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs use the stand-in host, with run roots under the test's directory."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    MADE.clear()
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", _make_standin)
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    monkeypatch.setenv("NO_COLOR", "1")


def _invoke(*args: str | Path) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def _trusting_statistics(result: ScenarioResult) -> ScenarioStatistics:
    """The weakened reader: a report's stored stats win over its trials."""
    if result.stats is not None:
        return result.stats
    from atlante_eval.report.results import statistics_of

    return statistics_of(result)


@pytest.fixture
def weakened(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust stored stats and skip the consistency check (the code before issue 23)."""
    for module in (compare_module, adaptive_module):
        monkeypatch.setattr(module, "statistics_of", _trusting_statistics)
        monkeypatch.setattr(module, "check_consistent", lambda _report, _source: None)


def _edit(path: Path, scenario: str, **stats: Any) -> Path:
    """Overwrite some of ``scenario``'s stored stats in the report at ``path``."""
    document = json.loads(path.read_text(encoding="utf-8"))
    document["scenarios"][scenario]["stats"].update(stats)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


def _forged(path: Path) -> Path:
    """4 of 4 trials passed, but the stats claim 0 of 1,000,000."""
    path.write_text(report({"s": counts(4)}).to_json(), encoding="utf-8")
    return _edit(path, "s", executed=1_000_000, graded=1_000_000, passed=0, passRateGraded=0.0)


def test_forged_stats_turn_compare_around_only_in_the_weakened_engine(
    tmp_path: Path, weakened: None
) -> None:
    """Weakened: a 4/4 BASE forged as 0/1,000,000 makes an unchanged HEAD 'improved'."""
    base = _forged(tmp_path / "base.json")
    head = tmp_path / "head.json"
    head.write_text(report({"s": counts(4)}).to_json(), encoding="utf-8")
    result = compare_report_files(base, head)
    assert result.scenarios["s"].verdict == "improved"


def test_compare_refuses_a_forged_baseline(tmp_path: Path) -> None:
    """compare: exit 2, report-unreadable naming the contradiction, nothing compared."""
    base = _forged(tmp_path / "base.json")
    head = tmp_path / "head.json"
    head.write_text(report({"s": counts(4)}).to_json(), encoding="utf-8")
    result = _invoke("compare", base, head, "--json")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    text = " ".join(result.stderr.split())
    assert "report-unreadable" in text
    assert "contradicts its own trials at /scenarios/s/stats/executed" in text
    assert "stats claim executed 1000000, but its 4 trials give 4" in text


@pytest.mark.parametrize(
    ("edit", "pointer"),
    [
        ({"passed": 5}, "/scenarios/s/stats/passed"),  # passed > graded
        ({"passed": -1}, "/scenarios/s/stats/passed"),
        ({"infraErrors": -3, "graded": 7}, "/scenarios/s/stats/graded"),
        ({"skipped": 2}, "/scenarios/s/stats/skipped"),
    ],
    ids=["passed-above-graded", "negative-passed", "negative-infra", "skipped"],
)
def test_inconsistent_stats_are_unreadable_not_an_internal_error(
    tmp_path: Path, edit: dict[str, int], pointer: str
) -> None:
    """Impossible figures (passed > graded, negatives) are exit 2, never exit 3."""
    base = tmp_path / "base.json"
    base.write_text(report({"s": counts(3, 1)}).to_json(), encoding="utf-8")
    _edit(base, "s", **edit)
    head = tmp_path / "head.json"
    head.write_text(report({"s": counts(4)}).to_json(), encoding="utf-8")
    result = _invoke("compare", base, head)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert pointer in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("where", "value", "pointer"),
    [
        ("passRate", 1.0, "/scenarios/s/passRate"),
        ("durationMs", -5, "/scenarios/s/trials/0/durationMs"),
        ("i", 1, "/scenarios/s/trials/1/i"),  # trial 0 claims trial 1's index
        ("totals", 9, "/meta/totals/trials"),
    ],
)
def test_reports_that_contradict_their_trials_are_refused(
    tmp_path: Path, where: str, value: int | float, pointer: str
) -> None:
    """A rate, a negative duration, a repeated index or wrong totals: report-unreadable."""
    document = json.loads(report({"s": counts(1, 3)}).to_json())
    scenario = document["scenarios"]["s"]
    if where == "passRate":
        scenario["passRate"] = value
    elif where == "totals":
        document["meta"]["totals"]["trials"] = value
    else:
        scenario["trials"][0][where] = value
    base = tmp_path / "base.json"
    base.write_text(json.dumps(document), encoding="utf-8")
    result = _invoke("compare", base, base)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert pointer in " ".join(result.stderr.split())


def _adaptive_args(project: Path, base: Path) -> list[str | Path]:
    return ["run", project, "--against", base, "--until-decided", "-j", "2", "--no-history"]


def _forged_baseline(tmp_path: Path) -> Path:
    """A baseline in the adaptive tests' shape (4/4 passes) whose stats claim 0/100."""
    path = baseline(tmp_path / "base.json", {"always": (4, 4)})
    document = json.loads(path.read_text(encoding="utf-8"))
    honest = json.loads(report({"s": counts(4)}).to_json())["scenarios"]["s"]["stats"]
    document["scenarios"]["always"]["stats"] = honest
    path.write_text(json.dumps(document), encoding="utf-8")
    return _edit(path, "always", executed=100, graded=100, passed=0, passRateGraded=0)


def _published(project: Path) -> list[Path]:
    return sorted((project / ".atlante" / "eval").glob("*/report.json"))


def test_forged_baseline_stops_an_adaptive_run_early_only_when_weakened(
    tmp_path: Path, weakened: None
) -> None:
    """Weakened: the forged 0/100 makes a steady scenario 'improved' at the first look."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("always", 1.0)])
    base = _forged_baseline(tmp_path)
    result = _invoke(*_adaptive_args(project, base))
    (path,) = _published(project)
    published = RunReport.model_validate_json(path.read_text(encoding="utf-8"))
    assert published.adaptive is not None
    decided = published.adaptive.scenarios["always"]
    assert decided.decision == "improved", result.stdout + result.stderr
    sessions = sum(host.sessions for host in MADE)
    assert 0 < sessions == len(published.scenarios["always"].trials) < 10


def test_forged_baseline_is_refused_before_any_trial(tmp_path: Path) -> None:
    """run --against a forged baseline: exit 2 with report-unreadable; no trial, no report."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("always", 1.0)])
    base = _forged_baseline(tmp_path)
    result = _invoke(*_adaptive_args(project, base))
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "report-unreadable" in result.stderr
    assert "/scenarios/always/stats/executed" in result.stderr
    assert _published(project) == []
    assert sum(host.sessions for host in MADE) == 0
    assert [path for host in MADE for path in host.prepared] == []


def test_a_20000_trial_baseline_without_stats_compares_with_exact_figures(
    tmp_path: Path,
) -> None:
    """A reference-shaped baseline of 20,000 trials: every figure from its trials, exact p."""
    document = json.loads(report({"s": counts(12_000, 8_000)}).to_json())
    document["scenarios"]["s"].pop("stats")
    base = tmp_path / "base.json"
    base.write_text(json.dumps(document), encoding="utf-8")
    head = tmp_path / "head.json"
    head.write_text(report({"s": counts(3, 17)}).to_json(), encoding="utf-8")
    result = compare_report_files(base, head)
    row = result.scenarios["s"]
    assert (row.base.passed, row.base.graded, row.head.passed, row.head.graded) == (
        12_000,
        20_000,
        3,
        20,
    )
    k = 12_003
    weights = {x: math.comb(20_000, x) * math.comb(20, k - x) for x in range(k - 20, k + 1)}
    tail = sum(w for w in weights.values() if w * 10**7 <= weights[12_000] * (10**7 + 1))
    assert row.p_value == pytest.approx(tail / math.comb(20_020, k), rel=1e-9)
    assert row.verdict == "regressed"
