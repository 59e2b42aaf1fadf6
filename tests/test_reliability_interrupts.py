"""Interrupting a run: SIGINT/SIGTERM to the real CLI, a second Ctrl-C, cancelling run_eval."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from clikit import (
    cleaned_up,
    hosts_running,
    isolated_tmpdir,
    journal_results,
    processes_marked,
    report_dirs,
    run_dirs,
    start_cli,
    wait_for,
)
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import ProgressEvent, RunReport, TrialFinished, run_eval
from atlante_eval.trial import process as process_module

#: SIGTERM-to-SIGKILL grace period used by these tests.
GRACE_S = 0.5
#: How long the stubborn hosts, their grandchildren and daemons sleep. A run that
#: ends sooner ended them; the only time bound asserted, and not one of speed.
STUBBORN_S = 120

FAST = actions({"write": "x.txt", "content": "done\n"}, {"usage": 5})
#: A host that ignores SIGTERM, forks a grandchild holding its stdout open, and starts
#: a daemon that leaves its process group: three processes per trial.
STUBBORN = actions(
    {"ignore_sigterm": True},
    {"grandchild": STUBBORN_S},
    {"daemon": STUBBORN_S},
    {"sleep": STUBBORN_S},
)


def _project(tmp_path: Path) -> Path:
    """Two fast trials that pass and two stubborn trials that never end by themselves."""
    return make_project(
        tmp_path / "project",
        scenarios=[
            scenario("a-fast", prompt=FAST, checks=[{"type": "file-exists", "path": "x.txt"}]),
            scenario("b-stubborn", prompt=STUBBORN),
        ],
        eval_extra={"budget": {"trials": 2, "timeoutMs": 600_000}},
    )


def _midway(tmpdir: Path, project: Path) -> bool:
    """Both fast trials are journaled; both stubborn hosts, grandchildren and daemons run."""
    dirs = report_dirs(project)
    done = len(journal_results(dirs[0])) if dirs else 0
    return done == 2 and len(hosts_running(tmpdir)) == 6


def _assert_partial_report(project: Path) -> RunReport:
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    assert report.meta.interrupted is True
    assert [t.verdict for t in report.scenarios["a-fast"].trials] == ["pass", "pass"]
    stubborn = report.scenarios["b-stubborn"].trials
    assert [t.verdict for t in stubborn] == ["infra-error", "infra-error"]
    for trial in stubborn:
        assert trial.error == "the run was interrupted before this trial finished"
    assert not list(run_dir.glob(".*.tmp"))
    return report


@pytest.mark.parametrize(
    ("sig", "keep"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["sigint", "sigterm", "sigint-keep"],
)
def test_signal_cancels_the_run_and_publishes_a_partial_report(
    tmp_path: Path, sig: signal.Signals, keep: bool
) -> None:
    """SIGINT/SIGTERM ends every host group (after the grace), cleans up, and exits 3."""
    project = _project(tmp_path)
    args = ["run", str(project), "--jobs", "4", *(["--keep"] if keep else [])]
    with cleaned_up(start_cli(args, tmp_path, grace_s=GRACE_S)) as cli:
        wait_for(lambda: _midway(cli.tmpdir, project))
        groups = {p.pgid for p in hosts_running(cli.tmpdir)}
        assert len(groups) == 4, "two host groups and two daemons in their own"
        cli.signal(sig)
        # Both waits end long before the hosts would end by themselves.
        wait_for(lambda: not hosts_running(cli.tmpdir), timeout_s=STUBBORN_S / 2)
        status = cli.wait(timeout_s=STUBBORN_S / 2)
    assert status == 3
    assert "error [eval-run-interrupted]" in cli.stderr
    assert "--resume" in cli.stderr
    assert processes_marked(cli.tmpdir) == []
    report = _assert_partial_report(project)
    if keep:
        [run_root] = run_dirs(cli.tmpdir)
        assert report.meta.run_root == str(run_root)
        assert len(list(run_root.glob("*-trial-*"))) == 4
    else:
        assert run_dirs(cli.tmpdir) == []


def test_second_interrupt_exits_at_once_and_kills_every_group(tmp_path: Path) -> None:
    """A second Ctrl-C during a long grace period exits at once; no host or daemon survives."""
    project = _project(tmp_path)
    with cleaned_up(start_cli(["run", str(project), "--jobs", "4"], tmp_path, grace_s=60)) as cli:
        wait_for(lambda: _midway(cli.tmpdir, project))
        cli.signal(signal.SIGINT)
        wait_for(lambda: "interrupting" in cli.stderr)
        assert len(hosts_running(cli.tmpdir)) == 6, "hosts ignore SIGTERM during the grace"
        cli.signal(signal.SIGINT)
        # The grace is 60 s: exiting within half of it means the second Ctrl-C did not wait.
        status = cli.wait(timeout_s=30)
        wait_for(lambda: not hosts_running(cli.tmpdir))
    assert status == 130
    assert processes_marked(cli.tmpdir) == []


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """End stubborn process groups quickly in the in-process tests."""
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", GRACE_S)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.usefixtures("short_grace")
async def test_cancelling_run_eval_publishes_a_partial_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel scope around run_eval publishes the finished trials and leaves nothing running."""
    project = _project(tmp_path)
    finished: list[Any] = []

    def on_event(event: ProgressEvent) -> None:
        if isinstance(event, TrialFinished):
            finished.append(event)

    with isolated_tmpdir(monkeypatch, tmp_path / "tmp") as tmpdir:
        async with anyio.create_task_group() as group:

            async def cancel_midway() -> None:
                # Polls /proc: no event tells when the hosts have started.
                while len(finished) < 2 or len(hosts_running(tmpdir)) < 6:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
                group.cancel_scope.cancel()

            group.start_soon(cancel_midway)
            await run_eval(project, host=StandinHost(), jobs=4, on_event=on_event)
            pytest.fail("run_eval returned although it was cancelled")
        assert processes_marked(tmpdir) == []
        assert run_dirs(tmpdir) == []
    _assert_partial_report(project)
