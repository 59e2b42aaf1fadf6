"""The engine end to end through run_eval, with the stand-in host as a real subprocess."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from enginekit import InstantHost, make_scenario, native_outputs, plan_of
from factory import CheckDoc, make_project, scenario
from standin import StandinHost, actions

from atlante_eval import (
    DiagnosticNotice,
    EvalRunError,
    ProgressEvent,
    RunFinished,
    RunReport,
    RunStarted,
    ScenarioFinished,
    ScenarioStarted,
    SessionEnd,
    SessionUsage,
    TrialContext,
    TrialFinished,
    TrialResult,
    TrialStarted,
    run_eval,
)
from atlante_eval.run.engine import Engine, EngineOptions
from atlante_eval.trial import process as process_module
from atlante_eval.trial import sandbox as sandbox_module


@pytest.fixture
def anyio_backend() -> str:
    """Run these tests on asyncio unless a test parametrizes the backend."""
    return "asyncio"


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put run roots (and kept sandboxes) under the test's own temporary directory."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """End stubborn process groups quickly, and mark this test's host processes."""
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    monkeypatch.setenv(MARK, f"{os.getpid()}-{request.node.name}")


WRITE_X = actions({"write": "x.txt", "content": "done\n"}, {"usage": 120, "cost": 0.01})
X_CHECKS: list[dict[str, Any]] = [
    {"type": "file-contains", "path": "x.txt", "pattern": "done"},
    {"type": "diff-allowlist", "allow": ["x.txt"]},
]


def project(tmp_path: Path, *docs: dict[str, Any], **budget: Any) -> Path:
    """A project with the given scenarios and budget (one trial unless told)."""
    budget.setdefault("trials", 1)
    return make_project(
        tmp_path / "project",
        scenarios=list(docs),
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "src/app.py": "print(1)\n"}},
        eval_extra={"budget": budget},
    )


#: An environment variable handed to every stand-in session of a test, so that
#: leftover processes are found by test, even when other test runs share the machine.
MARK = "ATLANTE_ENGINE_TEST_MARK"


async def run(root: Path, host: Any = None, **kwargs: Any) -> RunReport:
    return await run_eval(root, host=host or StandinHost(), pass_env=[MARK], **kwargs)


def trials(report: RunReport, name: str) -> list[TrialResult]:
    return report.scenarios[name].trials


def verdicts(report: RunReport) -> dict[str, list[str]]:
    return {name: [t.verdict for t in s.trials] for name, s in report.scenarios.items()}


# -- verdicts ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pass_records_usage_checks_diff_and_changes(tmp_path: Path) -> None:
    """A completed session whose checks all pass is a pass with usage, checks and diff."""
    prompt = actions(
        {"model": "acme/model-x"},
        {"write": "x.txt", "content": "done\n"},
        {"usage": 300, "cost": 0.02},
        {"usage": 180, "cost": 0.01},
    )
    root = project(tmp_path, scenario("ok", prompt=prompt, checks=X_CHECKS))
    report = await run(root)
    [trial] = trials(report, "ok")
    assert trial.verdict == "pass"
    assert trial.tokens == 480
    assert trial.cost == pytest.approx(0.03)
    assert trial.model == "acme/model-x"
    assert trial.budget_unmonitored is None
    assert trial.error is None
    assert [c.verdict for c in trial.checks or []] == ["pass", "pass"]
    assert trial.changed_files == ["x.txt"]
    assert trial.diff is not None
    assert "+done" in trial.diff
    assert report.meta.model == "acme/model-x"
    assert report.meta.model_version == "model-x"
    assert report.scenarios["ok"].pass_rate == 1.0


@pytest.mark.anyio
async def test_failing_check_is_a_fail_and_every_check_still_runs(tmp_path: Path) -> None:
    """A false assertion fails the trial; later checks still run and are recorded."""
    checks: list[CheckDoc] = [
        {"type": "file-exists", "path": "missing.txt"},
        {"type": "command", "run": ["atlante-no-such-command"]},
        {"type": "file-contains", "path": "x.txt", "pattern": "done"},
    ]
    root = project(
        tmp_path,
        scenario("bad", prompt=WRITE_X, checks=checks[:1] + checks[2:]),
        scenario("err", prompt=WRITE_X, checks=checks),
    )
    report = await run(root)
    [bad] = trials(report, "bad")
    [err] = trials(report, "err")
    assert bad.verdict == "fail"
    assert [c.verdict for c in bad.checks or []] == ["fail", "pass"]
    assert err.verdict == "infra-error"
    assert [c.verdict for c in err.checks or []] == ["fail", "error", "pass"]
    assert err.error is not None
    assert err.error.startswith("check 1 (command) could not run:")


@pytest.mark.anyio
async def test_scenario_timeout_override_ends_the_session(tmp_path: Path) -> None:
    """budget.timeoutMs of a scenario overrides the run's and ends the session as timeout."""
    slow = actions({"sleep": 20})
    root = project(
        tmp_path,
        scenario("slow", prompt=slow, budget={"timeoutMs": 400}),
        scenario("quick", prompt=WRITE_X, checks=X_CHECKS),
        timeoutMs=30_000,
    )
    report = await run(root)
    [slow_trial] = trials(report, "slow")
    assert slow_trial.verdict == "timeout"
    assert slow_trial.error == "trial exceeded 400ms"
    assert slow_trial.checks is None
    assert slow_trial.diff is None
    assert slow_trial.budget_unmonitored is True
    assert 400 <= slow_trial.duration_ms < 20_000  # from the deadline, before the host's sleep
    assert trials(report, "quick")[0].verdict == "pass"
    assert report.meta.config.timeout_ms == 30_000


@pytest.mark.anyio
async def test_run_timeout_applies_without_an_override(tmp_path: Path) -> None:
    """eval.budget.timeoutMs bounds every session of scenarios without an override."""
    root = project(tmp_path, scenario("slow", prompt=actions({"sleep": 20})), timeoutMs=300)
    [trial] = trials(await run(root), "slow")
    assert trial.verdict == "timeout"
    assert trial.error == "trial exceeded 300ms"


@pytest.mark.anyio
async def test_token_budget_aborts_mid_stream(tmp_path: Path) -> None:
    """Cumulative usage above maxTokens aborts the session at once: budget-exceeded."""
    prompt = actions({"usage": 600}, {"usage": 600}, {"sleep": 20}, {"write": "late.txt"})
    root = project(tmp_path, scenario("greedy", prompt=prompt), maxTokens=1000)
    report = await run(root)
    [trial] = trials(report, "greedy")
    assert trial.verdict == "budget-exceeded"
    assert trial.tokens == 1200
    assert trial.error == "trial exceeded 1000 tokens"
    assert trial.duration_ms < 20_000  # aborted mid-stream, not waited out
    assert trial.checks is None
    assert trial.budget_unmonitored is None
    assert report.scenarios["greedy"].pass_rate == 0.0


@pytest.mark.anyio
async def test_usage_equal_to_the_budget_is_not_exceeded(tmp_path: Path) -> None:
    """Only usage strictly greater than maxTokens aborts."""
    root = project(tmp_path, scenario("exact", prompt=actions({"usage": 1000})), maxTokens=1000)
    [trial] = trials(await run(root), "exact")
    assert trial.verdict == "pass"
    assert trial.tokens == 1000


@pytest.mark.anyio
async def test_host_failure_is_an_infra_error(tmp_path: Path) -> None:
    """A host that exits non-zero makes the trial an infra-error carrying its stderr."""
    prompt = actions({"stderr": "boom: provider said 529"}, {"exit": 3})
    root = project(tmp_path, scenario("broken", prompt=prompt))
    [trial] = trials(await run(root), "broken")
    assert trial.verdict == "infra-error"
    assert trial.error == "standin run exited 3: boom: provider said 529"
    assert trial.checks is None
    assert trial.budget_unmonitored is None


@pytest.mark.anyio
async def test_crashing_run_session_is_an_infra_error_and_others_continue(
    tmp_path: Path,
) -> None:
    """An exception from Host.run_session is that trial's infra-error; the run goes on."""
    root = project(tmp_path, scenario("a"), scenario("b"), trials=2)
    host = InstantHost(crash=True)
    report = await run(root, host, jobs=2)
    assert verdicts(report) == {"a": ["infra-error"] * 2, "b": ["infra-error"] * 2}
    assert {t.error for t in report.all_trials()} == {
        "host instant failed: RuntimeError: host exploded"
    }
    assert host.sessions == 4


@pytest.mark.anyio
async def test_budget_unmonitored_without_usage_events(tmp_path: Path) -> None:
    """A completed session with no usage event is marked budgetUnmonitored."""
    root = project(tmp_path, scenario("quiet", prompt=actions({"write": "x.txt"})))
    [trial] = trials(await run(root), "quiet")
    assert trial.verdict == "pass"
    assert trial.budget_unmonitored is True
    assert trial.tokens is None


# -- sessions budget -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_max_sessions_skips_later_trials(tmp_path: Path) -> None:
    """maxSessions 2 with 3 trials: pass, pass, skipped-budget (zero duration, no sandbox)."""
    root = project(tmp_path, scenario("capped", prompt=WRITE_X), trials=3, maxSessions=2)
    host = StandinHost()
    report = await run(root, host, keep=True)
    capped = trials(report, "capped")
    assert [t.verdict for t in capped] == ["pass", "pass", "skipped-budget"]
    skipped = capped[2]
    assert skipped.model_dump(exclude_none=True) == {
        "i": 2,
        "verdict": "skipped-budget",
        "duration_ms": 0,
    }
    assert host.sessions == 2
    assert len(host.prepared) == 2
    assert report.scenarios["capped"].pass_rate == 1.0
    assert report.meta.run_root is not None
    names = [p.name async for p in anyio.Path(report.meta.run_root).iterdir()]
    assert sorted(n.rsplit("-", 1)[0] for n in names if n[0] != ".") == [
        "capped-trial-0",
        "capped-trial-1",
    ]
    sandbox_module.remove_tree(Path(report.meta.run_root))


@pytest.mark.anyio
async def test_all_skipped_scenario_has_zero_pass_rate(tmp_path: Path) -> None:
    """Later scenarios keep getting skipped trials; all-skipped means pass rate 0."""
    root = project(tmp_path, scenario("a"), scenario("b"), trials=2, maxSessions=2)
    report = await run(root, InstantHost())
    assert verdicts(report) == {"a": ["pass", "pass"], "b": ["skipped-budget"] * 2}
    assert report.scenarios["b"].pass_rate == 0.0
    assert report.scenarios["b"].mean_duration_ms == 0
    assert report.scenarios["b"].spread.duration_p95_ms == 0


@pytest.mark.anyio
@pytest.mark.parametrize("jobs", [1, 8])
async def test_assembly_failures_take_no_session(
    tmp_path: Path, jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trials whose assembly fails take no session, whatever --jobs is."""
    failing_setup = ["python3", "-c", "import sys; sys.exit(4)"]
    root = project(
        tmp_path,
        scenario("a-broken", setup=failing_setup),
        scenario("b-fine"),
        scenario("c-late"),
        trials=2,
        maxSessions=3,
    )
    host = InstantHost()
    report = await run(root, host, jobs=jobs)
    assert verdicts(report) == {
        "a-broken": ["infra-error", "infra-error"],
        "b-fine": ["pass", "pass"],
        "c-late": ["pass", "skipped-budget"],
    }
    assert host.sessions == 3
    assert trials(report, "a-broken")[0].error == "setup failed: exit 4"


# -- setup, fixtures, native outputs -------------------------------------------------------


@pytest.mark.anyio
async def test_setup_timeout_is_an_infra_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setup past its timeout makes the trial an infra-error and starts no session."""
    monkeypatch.setattr(sandbox_module, "SETUP_TIMEOUT_MS", 300)
    root = project(tmp_path, scenario("slow-setup", setup=["sleep", "20"]))
    host = InstantHost()
    report = await run(root, host)
    [trial] = trials(report, "slow-setup")
    assert trial.verdict == "infra-error"
    assert trial.error == "setup timed out after 300ms"
    assert trial.duration_ms >= 300
    assert host.sessions == 0


@pytest.mark.anyio
async def test_fixture_colliding_with_a_native_output_is_an_infra_error(tmp_path: Path) -> None:
    """A fixture file at a native output path fails the trial with a rename-or-remove message."""
    root = make_project(
        tmp_path / "project",
        scenarios=[scenario("collide")],
        fixtures={"eval/fixtures/app": {".opencode/agents/reviewer.md": "mine\n"}},
        eval_extra={"budget": {"trials": 1}},
    )
    [trial] = trials(await run(root), "collide")
    assert trial.verdict == "infra-error"
    assert trial.error == (
        "fixture file collides with a verified native output at .opencode/agents/reviewer.md; "
        "rename or remove it in the fixture"
    )


@pytest.mark.anyio
async def test_missing_fixture_at_run_time_is_an_infra_error(tmp_path: Path) -> None:
    """A fixture that vanished after validation fails only its trials."""
    root = tmp_path / "project"
    (root / "fix").mkdir(parents=True)
    (root / "fix" / "README.md").write_text("hello\n")
    scenarios = [make_scenario(root, "gone", fixture="missing"), make_scenario(root, "here")]
    host = InstantHost()
    results = await _engine(root, scenarios, host, fixture="fix")
    assert results[0].verdict == "infra-error"
    assert results[0].error is not None
    assert "fixture" in results[0].error
    assert results[1].verdict == "pass"


async def _engine(
    root: Path,
    scenarios: list[Any],
    host: Any,
    *,
    fixture: str,
    jobs: int = 2,
    on_session_end: Any = None,
    **budget: Any,
) -> list[TrialResult]:
    """Run an Engine directly on hand-made scenarios (their fixture falls back to ``fixture``)."""
    fixed = [
        s
        if s.document.task.fixture != "eval/fixtures/app"
        else make_scenario(root, s.name, fixture=fixture)
        for s in scenarios
    ]
    plan = plan_of(fixed, **budget)
    run_root = root.parent / "runs"
    run_root.mkdir(exist_ok=True)
    recorded: dict[int, TrialResult] = {}

    async def emit(_event: ProgressEvent) -> None:
        return None

    async def on_trial(planned: Any, result: TrialResult) -> None:
        recorded[planned.position] = result

    engine = Engine(
        plan=plan,
        host=host,
        native=native_outputs(),
        run_root=run_root,
        options=EngineOptions(jobs=jobs),
        emit=emit,
        on_trial=on_trial,
        on_session_end=on_session_end,
    )
    await engine.run()
    return [recorded[p] for p in sorted(recorded)]


@pytest.mark.anyio
@pytest.mark.parametrize(("jobs", "expected"), [(1, [False, False, True]), (3, [True] * 3)])
async def test_the_session_end_hook_says_when_no_trial_waits_to_start(
    tmp_path: Path, jobs: int, expected: list[bool]
) -> None:
    """The run's end is warmed up once every trial has started (run/prewarm.py): one at a
    time, only the last session's end says so; three at once, every one does."""
    root = tmp_path / "project"
    (root / "fix").mkdir(parents=True)
    (root / "fix" / "README.md").write_text("hello\n")
    seen: list[bool] = []
    results = await _engine(
        root,
        [make_scenario(root, "s")],
        InstantHost(),
        fixture="fix",
        jobs=jobs,
        on_session_end=seen.append,
        trials=3,
    )
    assert [r.verdict for r in results] == ["pass"] * 3
    assert seen == expected


# -- what the agent does to git --------------------------------------------------------------


COMMIT = [{"run": ["git", "add", "-A"]}, {"run": ["git", "commit", "-qm", "agent"]}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("before", "after"),
    [
        ([], COMMIT),
        ([{"run": ["git", "update-index", "--assume-unchanged", "README.md"]}], []),
        ([{"run": ["git", "update-index", "--skip-worktree", "README.md"]}], []),
        ([], [{"delete": ".git"}]),
    ],
    ids=["commit", "assume-unchanged", "skip-worktree", "delete-git"],
)
async def test_agent_git_tricks_do_not_change_grading(
    tmp_path: Path, before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> None:
    """Committing, hiding edits with index flags or deleting .git cannot hide changes."""
    prompt = actions(
        *before,
        {"write": "README.md", "content": "edited by the agent\n"},
        {"write": "secret.txt", "content": "out of scope\n"},
        *after,
    )
    root = project(
        tmp_path,
        scenario("tricky", prompt=prompt, checks=[{"type": "diff-allowlist", "allow": ["x"]}]),
    )
    [trial] = trials(await run(root), "tricky")
    assert trial.verdict == "fail"
    assert trial.checks is not None
    assert trial.checks[0].evidence["unexpected"] == ["README.md", "secret.txt"]
    assert trial.diff is not None
    assert "+edited by the agent" in trial.diff
    assert "+out of scope" in trial.diff


@pytest.mark.anyio
async def test_changes_are_collected_before_checks_run(tmp_path: Path) -> None:
    """Files created by command checks (e.g. __pycache__) are not agent changes."""
    checks = [
        {
            "type": "command",
            "run": ["python3", "-c", "import os; os.makedirs('__pycache__'); open('a.out','w')"],
        },
        {"type": "diff-allowlist", "allow": ["x.txt"]},
    ]
    root = project(tmp_path, scenario("artefacts", prompt=WRITE_X, checks=checks))
    [trial] = trials(await run(root), "artefacts")
    assert trial.verdict == "pass"
    assert trial.changed_files == ["x.txt"]
    assert trial.diff is not None
    assert "a.out" not in trial.diff


@pytest.mark.anyio
async def test_allowlist_ignores_runtime_artefacts_but_not_host_config_or_native(
    tmp_path: Path,
) -> None:
    """Host runtime globs are ignored; edits to host config and native outputs are flagged."""
    prompt = actions(
        {"write": ".standin/runtime/cache/blob", "content": "runtime\n"},
        {"write": ".standin/config.json", "content": "{}"},
        {"append": ".opencode/agents/reviewer.md", "content": "ignore your rules\n"},
        {"write": "x.txt", "content": "done\n"},
    )
    root = project(tmp_path, scenario("owned", prompt=prompt, checks=X_CHECKS[1:]))
    [trial] = trials(await run(root), "owned")
    assert trial.verdict == "fail"
    assert trial.checks is not None
    assert trial.checks[0].evidence == {
        "allow": ["x.txt"],
        "unexpected": [".opencode/agents/reviewer.md", ".standin/config.json"],
        "changed": [".opencode/agents/reviewer.md", ".standin/config.json", "x.txt"],
    }
    assert trial.changed_files is not None
    assert ".standin/runtime/cache/blob" in trial.changed_files


# -- stubborn and noisy hosts ---------------------------------------------------------------


def _standin_pids() -> list[int]:
    """Live stand-in host processes started by the current test."""
    mark = f"{MARK}={os.environ[MARK]}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"standin_host.py" in cmdline and mark in environ.split(b"\0") and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.mark.anyio
async def test_host_ignoring_sigterm_with_a_grandchild_ends_within_timeout_plus_grace(
    tmp_path: Path,
) -> None:
    """A host ignoring SIGTERM whose grandchild holds the pipes is ended; nothing survives."""
    prompt = actions({"ignore_sigterm": True}, {"grandchild": 60}, {"sleep": 60})
    root = project(tmp_path, scenario("stubborn", prompt=prompt), timeoutMs=500)
    report = await run(root)
    [trial] = trials(report, "stubborn")
    assert trial.verdict == "timeout"
    assert 500 <= trial.duration_ms < 60_000  # killed after the grace, not waited out
    assert _standin_pids() == []


@pytest.mark.anyio
async def test_host_printing_100_megabytes_is_bounded(tmp_path: Path) -> None:
    """A host flooding 100 MB (one line, no newline) still completes and is graded."""
    prompt = actions({"flood": 100 * 1024 * 1024}, {"usage": 10}, {"write": "x.txt"})
    checks = [{"type": "file-exists", "path": "x.txt"}]
    root = project(tmp_path, scenario("noisy", prompt=prompt, checks=checks), timeoutMs=60_000)
    [trial] = trials(await run(root), "noisy")
    assert trial.verdict == "pass"
    assert trial.tokens == 10


# -- order, concurrency, progress -----------------------------------------------------------


def _mixed_project(tmp_path: Path) -> Path:
    return project(
        tmp_path,
        scenario("d-pass", prompt=actions({"sleep": 0.2}, {"write": "x.txt"}, {"usage": 5})),
        scenario("a-fail", checks=[{"type": "file-exists", "path": "nope"}]),
        scenario("c-timeout", prompt=actions({"sleep": 20}), budget={"timeoutMs": 300}),
        scenario("b-infra", prompt=actions({"exit": 2})),
        scenario("e-late"),
        trials=2,
        maxSessions=8,
    )


@pytest.mark.anyio
async def test_verdicts_and_order_do_not_depend_on_jobs(tmp_path: Path) -> None:
    """The same plan gives the same report order and verdicts with --jobs 1 and 8."""
    root = _mixed_project(tmp_path)
    sequential = await run(root, jobs=1)
    parallel = await run(root, jobs=8)
    expected = {
        "a-fail": ["fail", "fail"],
        "b-infra": ["infra-error", "infra-error"],
        "c-timeout": ["timeout", "timeout"],
        "d-pass": ["pass", "pass"],
        "e-late": ["skipped-budget", "skipped-budget"],
    }
    assert verdicts(sequential) == expected
    assert verdicts(parallel) == expected
    assert list(parallel.scenarios) == sorted(expected)
    assert all([t.i for t in s.trials] == [0, 1] for s in (*sequential.scenarios.values(),))
    assert parallel.meta.jobs == 8


@pytest.mark.anyio
async def test_jobs_one_emits_events_in_plan_order(tmp_path: Path) -> None:
    """With one job, trial events follow plan order and scenario events bracket them."""
    root = project(tmp_path, scenario("b"), scenario("a"), trials=2, maxSessions=3)
    events: list[ProgressEvent] = []
    report = await run(root, InstantHost(), jobs=1, on_event=events.append)
    shape = [
        (type(e).__name__, getattr(e, "scenario", None), getattr(e, "trial", None))
        for e in events
        if not isinstance(e, DiagnosticNotice)
    ]
    assert shape == [
        ("RunStarted", None, None),
        ("ScenarioStarted", "a", None),
        ("TrialStarted", "a", 0),
        ("TrialFinished", "a", 0),
        ("TrialStarted", "a", 1),
        ("TrialFinished", "a", 1),
        ("ScenarioFinished", "a", None),
        ("ScenarioStarted", "b", None),
        ("TrialStarted", "b", 0),
        ("TrialFinished", "b", 0),
        ("TrialFinished", "b", 1),
        ("ScenarioFinished", "b", None),
        ("RunFinished", None, None),
    ]
    [notice] = [e for e in events if isinstance(e, DiagnosticNotice)]
    assert notice.diagnostic.code == "eval-sessions-exceed-budget"
    assert events.index(notice) < next(i for i, e in enumerate(events) if isinstance(e, RunStarted))
    started = next(e for e in events if isinstance(e, RunStarted))
    assert (started.total, started.jobs, started.host) == (4, 1, "instant")
    assert started.config is not None
    assert started.config.max_sessions == 3
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.run_id == report.run_id
    assert not finished.interrupted
    scenario_end = next(e for e in events if isinstance(e, ScenarioFinished))
    assert scenario_end.result.pass_rate == 1.0


@pytest.mark.anyio
async def test_parallel_trials_start_in_plan_order(tmp_path: Path) -> None:
    """Under --jobs 8, trials still start in plan order and the report is ordered."""
    docs = [scenario(f"s{n}", prompt=actions({"sleep": 0.05 * (n % 3)})) for n in range(4)]
    root = project(tmp_path, *docs, trials=3)
    events: list[ProgressEvent] = []
    report = await run(root, jobs=8, on_event=events.append)
    starts = [(e.scenario, e.trial) for e in events if isinstance(e, TrialStarted)]
    assert starts == [(f"s{n}", i) for n in range(4) for i in range(3)]
    assert list(report.scenarios) == ["s0", "s1", "s2", "s3"]
    assert all([t.i for t in s.trials] == [0, 1, 2] for s in report.scenarios.values())
    assert sum(isinstance(e, ScenarioStarted) for e in events) == 4
    assert sum(isinstance(e, TrialFinished) for e in events) == 12


@pytest.mark.anyio
async def test_progress_callback_error_publishes_a_partial_report(tmp_path: Path) -> None:
    """An exception in the progress callback becomes EvalRunError with a published report."""
    root = project(tmp_path, scenario("a"), scenario("b"), trials=2)

    def callback(event: ProgressEvent) -> None:
        if isinstance(event, TrialFinished) and event.scenario == "b":
            raise RuntimeError("progress sink broke")

    with pytest.raises(EvalRunError) as caught:
        await run(root, InstantHost(), jobs=1, on_event=callback)
    failure = caught.value
    assert failure.exit_code == 3
    assert failure.diagnostics[0].code == "eval-run-failed"
    assert failure.diagnostics[0].cause == "RuntimeError: progress sink broke"
    assert failure.report.meta.interrupted is True
    assert [t.verdict for t in failure.report.scenarios["a"].trials] == ["pass", "pass"]
    assert failure.report_path is not None
    published = json.loads(failure.report_path.read_text())
    assert published["runId"] == failure.report.run_id
    assert published["meta"]["interrupted"] is True


@pytest.mark.anyio
async def test_async_progress_callback_error_at_run_start_is_handled(tmp_path: Path) -> None:
    """An async callback failing on RunStarted still yields EvalRunError and cleans up."""
    root = project(tmp_path, scenario("a"))

    async def callback(event: ProgressEvent) -> None:
        if isinstance(event, RunStarted):
            raise ValueError("no")

    host = InstantHost()
    with pytest.raises(EvalRunError) as caught:
        await run(root, host, on_event=callback)
    assert host.sessions == 0
    assert caught.value.report_path is not None
    assert caught.value.report_path.is_file()


# -- meta, keep, backends -------------------------------------------------------------------


@pytest.mark.anyio
async def test_meta_model_falls_back_to_eval_model_then_unknown(tmp_path: Path) -> None:
    """eval.model fills meta.model when the host reports none; otherwise 'unknown'."""
    root = make_project(
        tmp_path / "with-model",
        scenarios=[scenario("a")],
        eval_extra={"model": "anthropic/claude-sonnet-4-5#high", "budget": {"trials": 1}},
    )
    report = await run(root, InstantHost())
    assert report.meta.model == "anthropic/claude-sonnet-4-5#high"
    assert report.meta.model_version == "claude-sonnet-4-5"
    bare = await run(project(tmp_path, scenario("a")), InstantHost())
    assert (bare.meta.model, bare.meta.model_version) == ("unknown", "unknown")


@pytest.mark.anyio
async def test_keep_records_sandbox_paths_that_exist(tmp_path: Path) -> None:
    """--keep leaves every sandbox in place and records its path in the report."""
    root = project(tmp_path, scenario("kept", prompt=WRITE_X), trials=2)
    report = await run(root, keep=True)
    paths = [Path(t.sandbox or "") for t in trials(report, "kept")]
    try:
        assert [p.name.rsplit("-", 1)[0] for p in paths] == ["kept-trial-0", "kept-trial-1"]
        assert paths[0].parent.parent == tmp_path / "tmp"
        assert all((p / "project" / "x.txt").is_file() for p in paths)
        assert report.meta.run_root == str(paths[0].parent)
    finally:
        sandbox_module.remove_tree(paths[0].parent)


@pytest.mark.anyio
async def test_sandboxes_are_removed_without_keep(tmp_path: Path) -> None:
    """Without --keep, no trial sandbox or run root survives the run."""
    root = project(tmp_path, scenario("gone", prompt=WRITE_X))
    host = StandinHost()
    report = await run(root, host)
    assert report.meta.run_root is None
    assert host.prepared
    assert not any(p.exists() for p in host.prepared)
    assert not host.prepared[0].parent.parent.exists()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_run_eval_works_under_asyncio_and_trio(tmp_path: Path) -> None:
    """run_eval runs the same on asyncio and trio, including timeouts and budgets."""
    root = project(
        tmp_path,
        scenario("ok", prompt=WRITE_X, checks=X_CHECKS),
        scenario("slow", prompt=actions({"sleep": 20}), budget={"timeoutMs": 300}),
        scenario("greedy", prompt=actions({"usage": 5000}, {"sleep": 20})),
        maxTokens=1000,
    )
    report = await run(root, jobs=3)
    assert verdicts(report) == {
        "greedy": ["budget-exceeded"],
        "ok": ["pass"],
        "slow": ["timeout"],
    }
    assert _standin_pids() == []


@pytest.mark.anyio
async def test_run_eval_rejects_bad_trials_before_running(tmp_path: Path) -> None:
    """trials outside 1..50 raise invalid-trials (exit 2) and start nothing."""
    from atlante_eval.diagnostics import DiagnosticError

    root = project(tmp_path, scenario("a"))
    host = InstantHost()
    for bad in (0, 51):
        with pytest.raises(DiagnosticError) as caught:
            await run(root, host, trials=bad)
        assert caught.value.exit_code == 2
        assert caught.value.diagnostics[0].code == "invalid-trials"
    assert host.sessions == 0
    assert not (root / ".atlante" / "eval").exists()


@pytest.mark.anyio
async def test_cancelling_run_eval_leaves_no_process_or_sandbox(tmp_path: Path) -> None:
    """Cancelling run_eval from outside ends host processes and removes sandboxes."""
    prompt = actions({"ignore_sigterm": True}, {"usage": 1}, {"sleep": 60})
    root = project(tmp_path, scenario("long", prompt=prompt))
    host = StandinHost()
    async with anyio.create_task_group() as group:
        group.start_soon(run, root, host)
        await host.streaming.wait()  # the session's process is running
        seen = _standin_pids()
        group.cancel_scope.cancel()
    assert seen, "the stand-in session was never seen running"
    assert _standin_pids() == []
    assert host.prepared
    assert not host.prepared[0].parent.parent.exists()


class _CountingHost(InstantHost):
    """An in-process host that records how many sessions overlap.

    The first sessions wait until ``overlap`` of them run at once (an event, not a
    sleep), so a run that never allows that many hangs (and times out) instead of
    passing by luck.
    """

    def __init__(self, overlap: int) -> None:
        super().__init__()
        self.overlap = overlap
        self.active = 0
        self.peak = 0
        self.full = anyio.Event()

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        self.active += 1
        self.peak = max(self.peak, self.active)
        if self.active >= self.overlap:
            self.full.set()
        try:
            await self.full.wait()
        finally:
            self.active -= 1
        return await super().run_session(context, usage)


@pytest.mark.anyio
@pytest.mark.parametrize("jobs", [1, 3])
async def test_jobs_bounds_concurrent_sessions(tmp_path: Path, jobs: int) -> None:
    """At most --jobs host sessions overlap, and with several jobs they do overlap."""
    root = project(tmp_path, scenario("a"), scenario("b"), trials=3, maxSessions=6)
    host = _CountingHost(overlap=jobs)
    report = await run(root, host, jobs=jobs)
    assert host.sessions == 6
    assert host.peak == jobs
    assert {t.verdict for t in report.all_trials()} == {"pass"}


@pytest.mark.anyio
async def test_interrupt_publishes_a_partial_report(tmp_path: Path) -> None:
    """RunControl.interrupt() cancels running trials and publishes what finished."""
    from atlante_eval import RunOptions
    from atlante_eval.run.runner import RunControl, execute_run

    root = project(
        tmp_path,
        scenario("a-fast"),
        scenario("b-slow", prompt=actions({"sleep": 30})),
        trials=2,
    )
    control = RunControl()
    host = StandinHost()

    def on_event(event: ProgressEvent) -> None:
        if isinstance(event, TrialStarted) and event.scenario == "b-slow" and event.trial == 0:
            control.interrupt()

    with pytest.raises(EvalRunError) as caught:
        await execute_run(
            root,
            RunOptions(jobs=1, pass_env=(MARK,)),
            host=host,
            on_event=on_event,
            control=control,
        )
    failure = caught.value
    assert failure.report.meta.wall_time_ms is not None
    assert failure.report.meta.wall_time_ms < 30_000  # interrupted, not waited out
    assert failure.diagnostics[0].code == "eval-run-interrupted"
    report = failure.report
    assert report.meta.interrupted is True
    assert verdicts(report) == {
        "a-fast": ["pass", "pass"],
        "b-slow": ["infra-error", "infra-error"],
    }
    # jobs=1: b-slow's trial 1 never started, so it enters no statistic.
    assert [(t.error, t.not_started) for t in trials(report, "b-slow")] == [
        ("the run was interrupted before this trial finished", None),
        ("the run was interrupted before this trial started", True),
    ]
    assert report.scenarios["b-slow"].stats is not None
    assert report.scenarios["b-slow"].stats.executed == 1
    assert json.loads(failure.report_path.read_text())["meta"]["interrupted"] is True
    assert _standin_pids() == []
    assert not any(p.exists() for p in host.prepared)
