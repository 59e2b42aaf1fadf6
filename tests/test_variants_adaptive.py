"""``run --until-decided`` with arms: each arm decided against the control arm as both grow
(stand-in host; the design itself is tested in test_two_sample.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from adaptivekit import decisions, interrupted_run
from factory import make_project, scenario
from standin import StandinHost
from typer.testing import CliRunner, Result

from atlante_eval import ProgressEvent, RunReport, hosts, run_eval
from atlante_eval.cli import app
from atlante_eval.report import ScenarioLooked, arm_scenarios

#: A check that passes only when the native agent file is in the sandbox.
_NEEDS_AGENT = [{"type": "file-exists", "path": ".opencode/agents/reviewer.md"}]
_ARMS: list[dict[str, Any]] = [
    {"name": "bare", "harness": "none", "control": True},
    {"name": "project"},
]
#: Looks at 4, 6, 9, 14 and 20 trials a side; unchanged within 35 points is reachable.
_ADAPTIVE: dict[str, Any] = {
    "until_decided": True,
    "min_trials": 4,
    "max_trials": 20,
    "margin": 0.35,
}


#: The same bounds on the command line.
_CLI_BOUNDS = ["--min-trials", "4", "--max-trials", "20", "--margin", "0.35"]


def _project(root: Path, variants: list[dict[str, Any]] | None = None) -> Path:
    return make_project(
        root,
        scenarios=[
            scenario("needs-agent", agent="reviewer", checks=_NEEDS_AGENT),
            scenario("plain"),
        ],
        eval_extra={
            "variants": variants or _ARMS,
            "budget": {"trials": 2, "maxSessions": 500},
            "gateway": "off",
        },
    )


def _run(root: Path, host: StandinHost | None = None, **options: Any) -> RunReport:
    return anyio.run(lambda: run_eval(root, host=host or StandinHost(), **options))


def _indices(report: RunReport, arm: str, name: str) -> list[int]:
    return sorted(t.i for t in arm_scenarios(report, arm)[name].trials)


def test_the_harness_arm_is_decided_improved_against_a_bare_control(tmp_path: Path) -> None:
    """The arm that installs the agent is improved after a few blocks; the scenario that
    passes either way is unchanged; the control stops with the last arm of its scenario."""
    events: list[ProgressEvent] = []
    root = _project(tmp_path / "p")
    report = anyio.run(
        lambda: run_eval(root, host=StandinHost(), jobs=2, on_event=events.append, **_ADAPTIVE)
    )
    record = report.adaptive
    assert record is not None
    assert (record.method, record.control, record.baseline) == (
        "exact-pocock-arms",
        "bare",
        "control arm bare",
    )
    assert record.baseline_run_id == report.run_id
    assert record.looks == [4, 6, 9, 14, 20]
    assert record.family_size == 3  # one arm: two scenarios plus its overall row
    agent = record.scenarios["needs-agent@project"]
    assert (agent.decision, agent.stopped, agent.scenario, agent.variant) == (
        "improved",
        "decided",
        "needs-agent",
        "project",
    )
    assert (agent.baseline_passed, agent.baseline_graded) == (0, agent.trials)
    assert agent.trials < 20
    plain = record.scenarios["plain@project"]
    assert (plain.decision, plain.stopped) == ("unchanged", "decided")
    # Both sides of each scenario ran the same blocks, up to the look that decided.
    for name, decided in (("needs-agent", agent), ("plain", plain)):
        assert _indices(report, "bare", name) == list(range(decided.trials))
        assert _indices(report, "project", name) == list(range(decided.trials))
    assert record.trials_used == 2 * (agent.trials + plain.trials)
    # The uplift section (compare over the whole table) agrees with every decision.
    assert report.uplift is not None
    assert report.uplift.arms["project"].scenarios["needs-agent"].verdict == "improved"
    assert report.uplift.margin == 0.35
    assert record.compare_agrees
    looked = [e for e in events if isinstance(e, ScenarioLooked)]
    assert {e.scenario for e in looked} == {"needs-agent@project", "plain@project"}
    assert all(e.control == "bare" for e in looked)
    assert looked[-1].stopped == "decided"


def test_a_regressing_arm_and_several_arms_share_the_family(tmp_path: Path) -> None:
    """With the harness as control, the bare arm regresses; a third arm that keeps the
    harness is judged too, and the family counts both arms' rows."""
    variants = [{"name": "project"}, {"name": "bare", "harness": "none"}, {"name": "again"}]
    report = _run(_project(tmp_path / "p", variants), jobs=2, **_ADAPTIVE)
    record = report.adaptive
    assert record is not None
    assert record.control == "project"
    assert record.family_size == 6
    assert record.scenarios["needs-agent@bare"].decision == "regressed"
    assert record.scenarios["needs-agent@again"].decision != "regressed"
    # The control went on as long as the slower of the two arms of its scenario.
    longest = max(record.scenarios[f"needs-agent@{arm}"].trials for arm in ("bare", "again"))
    assert len(arm_scenarios(report, "project")["needs-agent"].trials) == longest


def test_the_cli_decides_arms_without_against_and_refuses_against_with_arms(
    tmp_path: Path,
) -> None:
    """No BASE is needed with arms; --against with arms, and --until-decided with neither,
    are refused before any trial (exit 2)."""
    root = _project(tmp_path / "p")

    def invoke(*args: str) -> Result:
        result = CliRunner().invoke(app, ["run", str(root), *args], catch_exceptions=False)
        assert "Traceback" not in result.stdout + result.stderr
        return result

    adaptive = ["--until-decided", *_CLI_BOUNDS]
    against = invoke(*adaptive, "--against", str(tmp_path / "base.json"))
    assert against.exit_code == 2
    assert "this run has arms" in " ".join(against.stderr.split())
    neither = invoke(*adaptive, "--variants", "none")
    assert neither.exit_code == 2
    assert "needs --against" in " ".join(neither.stderr.split())
    assert not any((root / ".atlante" / "eval").glob("*/report.json"))


def test_resume_of_an_interrupted_run_with_arms_reaches_the_samedecisions(
    tmp_path: Path,
) -> None:
    """Interrupted in its second wave, then resumed: the same looks and decisions."""
    root = _project(tmp_path / "p")
    whole = _run(root, jobs=1, out=tmp_path / "whole", **_ADAPTIVE)
    # the first wave is 16 trials: after 19 the second is under way
    failure = interrupted_run(root, _ADAPTIVE, after=19, out=tmp_path / "cut", host=StandinHost())
    assert failure.report.adaptive is not None
    assert "interrupted" in {s.stopped for s in failure.report.adaptive.scenarios.values()}
    host = StandinHost()
    resumed = _run(
        root, host, jobs=1, out=tmp_path / "resumed", resume=failure.report_path.parent, **_ADAPTIVE
    )
    assert decisions(resumed) == decisions(whole)
    reused = [
        t
        for arm in ("bare", "project")
        for result in arm_scenarios(resumed, arm).values()
        for t in result.trials
        if t.reused
    ]
    assert len(reused) >= 16
    assert host.sessions == whole.adaptive.trials_used - len(reused)  # type: ignore[union-attr]


def test_max_sessions_stops_every_arm(tmp_path: Path) -> None:
    """The session budget is shared by all arms: once spent, every arm stops as
    ``max-sessions`` and the trials it cut off are skipped-budget."""
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario("plain")],
        eval_extra={
            "variants": _ARMS,
            "budget": {"trials": 2, "maxSessions": 10},
            "gateway": "off",
        },
    )
    host = StandinHost()
    report = _run(root, host, jobs=1, **{**_ADAPTIVE, "min_trials": 6})
    assert report.adaptive is not None
    # 5 against 5 passing trials decide nothing yet; the budget ends the run
    assert report.adaptive.scenarios["plain@project"].stopped == "max-sessions"
    assert report.adaptive.scenarios["plain@project"].decision == "inconclusive"
    assert host.sessions == 10
    trials = [t for arm in ("bare", "project") for t in arm_scenarios(report, arm)["plain"].trials]
    assert sum(1 for t in trials if t.verdict == "skipped-budget") == 2


def test_the_cli_prints_each_arms_looks_and_thedecisions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Progress names each arm's look against the control; a finished scenario gives every
    arm's count; the summary says what each arm was decided against."""
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    monkeypatch.setenv("NO_COLOR", "1")
    root = _project(tmp_path / "p")
    result = CliRunner().invoke(
        app,
        ["run", str(root), "--until-decided", *_CLI_BOUNDS, "--no-html", "-j", "2"],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.stderr  # the bare arm fails needs-agent
    lines = result.stderr.splitlines() + result.stdout.splitlines()
    assert any(
        line.startswith("needs-agent@project: look at 6 trials · 100% vs control bare 0%")
        and line.endswith("improved (decided)")
        for line in lines
    ), lines
    assert "needs-agent: 0/6 trials passed · [project] 6/6" in lines
    assert any(
        line.startswith("adaptive each arm against the control arm bare · ") for line in lines
    )
    assert "  needs-agent@project: improved after 6 trials (decided)" in lines
