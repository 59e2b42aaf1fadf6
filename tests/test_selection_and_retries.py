"""Quick-loop selection (--scenario globs, --last-failed), --retry-infra and --resume reuse."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import DiagnosticNotice, ProgressEvent, RunOptions, RunReport
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.hosts import SessionEnd, SessionUsage, TrialContext
from atlante_eval.run.runner import execute_run

OUT_CHECK = [{"type": "file-exists", "path": "out.txt"}]
WRITES = actions({"write": "out.txt", "content": "x"})
IDLE = actions()


def _project(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "p",
        scenarios=[
            scenario("api-create", prompt=WRITES, checks=OUT_CHECK),
            scenario("api-delete", prompt=IDLE, checks=OUT_CHECK),
            scenario("docs-readme", prompt=WRITES, checks=OUT_CHECK),
        ],
        eval_extra={"budget": {"trials": 2}},
    )


def _run(root: Path, options: RunOptions, host: StandinHost | None = None) -> RunReport:
    return anyio.run(lambda: execute_run(root, options, host=host or StandinHost())).report


def test_scenario_filter_accepts_glob_patterns(tmp_path: Path) -> None:
    """--scenario 'api-*' runs exactly the matching scenarios."""
    report = _run(_project(tmp_path), RunOptions(scenarios=("api-*",)))
    assert list(report.scenarios) == ["api-create", "api-delete"]


def test_scenario_glob_matching_nothing_is_unknown(tmp_path: Path) -> None:
    """A pattern that matches no discovered scenario is unknown-scenario-filter (exit 2)."""
    with pytest.raises(DiagnosticError) as caught:
        _run(_project(tmp_path), RunOptions(scenarios=("web-*",)))
    assert [d.code for d in caught.value.diagnostics] == ["unknown-scenario-filter"]
    assert caught.value.exit_code == 2


def test_last_failed_reruns_only_scenarios_that_did_not_fully_pass(tmp_path: Path) -> None:
    """After a run where api-delete failed, --last-failed runs only api-delete."""
    root = _project(tmp_path)
    first = _run(root, RunOptions())
    assert [n for n, r in first.scenarios.items() if r.pass_rate < 1] == ["api-delete"]
    notices: list[ProgressEvent] = []
    second = anyio.run(
        lambda: execute_run(
            root, RunOptions(last_failed=True), host=StandinHost(), on_event=notices.append
        )
    ).report
    assert list(second.scenarios) == ["api-delete"]
    [note] = [e.diagnostic for e in notices if isinstance(e, DiagnosticNotice)]
    assert note.code == "last-failed"
    assert first.run_id in note.message


def test_last_failed_without_an_earlier_report_runs_everything(tmp_path: Path) -> None:
    """With no earlier report, --last-failed runs every selected scenario and says so."""
    report = _run(_project(tmp_path), RunOptions(last_failed=True))
    assert len(report.scenarios) == 3


class FlakyHost(StandinHost):
    """Fails each trial's first session with an infra error, then behaves."""

    def __init__(self, failures: int = 1) -> None:
        super().__init__()
        self.failures = failures
        self.seen: dict[tuple[str, int], int] = {}

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        key = (context.scenario.name, context.trial)
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] <= self.failures:
            return SessionEnd(error="HTTP 529 overloaded (simulated)")
        return await super().run_session(context, usage)


def test_retry_infra_reruns_infra_errors_and_keeps_every_attempt(tmp_path: Path) -> None:
    """--retry-infra 2 turns a transient infra-error into the real verdict, attempts recorded."""
    root = _project(tmp_path)
    report = _run(root, RunOptions(scenarios=("api-create",), retry_infra=2), FlakyHost())
    trials = report.scenarios["api-create"].trials
    assert [t.verdict for t in trials] == ["pass", "pass"]
    for trial in trials:
        assert trial.attempts is not None
        assert [(a.verdict, a.error) for a in trial.attempts] == [
            ("infra-error", "HTTP 529 overloaded (simulated)")
        ]


def test_retry_infra_gives_up_after_n_retries(tmp_path: Path) -> None:
    """A trial failing more often than allowed stays infra-error with every attempt kept."""
    root = _project(tmp_path)
    host = FlakyHost(failures=5)
    report = _run(root, RunOptions(scenarios=("api-create",), trials=1, retry_infra=2), host)
    [trial] = report.scenarios["api-create"].trials
    assert trial.verdict == "infra-error"
    assert trial.attempts is not None
    assert len(trial.attempts) == 2
    assert host.seen[("api-create", 0)] == 3


def test_without_retry_infra_errors_stand(tmp_path: Path) -> None:
    """By default an infra-error is not retried."""
    root = _project(tmp_path)
    report = _run(root, RunOptions(scenarios=("api-create",), trials=1), FlakyHost())
    [trial] = report.scenarios["api-create"].trials
    assert trial.verdict == "infra-error"
    assert trial.attempts is None


def test_resume_reuses_matching_trials_and_reruns_changed_scenarios(tmp_path: Path) -> None:
    """--resume reuses trials whose fingerprint matches and reruns a scenario that changed."""
    root = _project(tmp_path)
    first = anyio.run(lambda: execute_run(root, RunOptions(), host=StandinHost()))
    changed = root / "eval" / "scenarios" / "docs-readme.eval.json"
    document = json.loads(changed.read_text(encoding="utf-8"))
    document["description"] = "now with a description"
    changed.write_text(json.dumps(document), encoding="utf-8")
    host = StandinHost()
    second = _run(root, RunOptions(resume=first.path.parent), host)
    reused = {n: [bool(t.reused) for t in r.trials] for n, r in second.scenarios.items()}
    assert reused == {
        "api-create": [True, True],
        "api-delete": [True, True],
        "docs-readme": [False, False],
    }
    assert host.sessions == 2
    assert second.meta.resumed_from == str(first.path.parent)
    assert first.path.is_file()  # the earlier run directory is left as it was


def test_resume_from_a_directory_without_a_run_is_refused(tmp_path: Path) -> None:
    """--resume of a directory with neither journal nor report is eval-resume-mismatch."""
    root = _project(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DiagnosticError) as caught:
        _run(root, RunOptions(resume=empty))
    assert [d.code for d in caught.value.diagnostics] == ["eval-resume-mismatch"]
