"""Nothing a limited trial starts outlives it: a killed host's daemon, an interrupted run.

Under ``none`` a daemon that leaves its process group and scrubs its environment
escapes the engine's marker sweep (docs/isolation.md says so). With limits every
process of a trial is in its control group, so removing the group kills it. The
weakened run (limits off) shows the daemon surviving; the limited one shows it
gone, and no group left. An interrupted run (SIGINT to the real CLI) removes its
groups as well.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from pathlib import Path

import anyio
import pytest
from clikit import cleaned_up, hosts_running, start_cli, wait_for
from factory import make_project, scenario
from limitskit import own_groups, processes_with, require_cgroups, token
from standin import StandinHost, actions

from atlante_eval import RunReport, run_eval


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("limited", [True, False], ids=["limited", "weakened"])
def test_a_killed_hosts_scrubbed_daemon_dies_with_the_trial_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limited: bool
) -> None:
    """The host starts a setsid daemon without the sweep marker and is SIGKILLed."""
    if limited:
        require_cgroups()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    marker = token()
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "killed",
                prompt=actions({"attack": "daemon", "args": [marker]}, {"signal": "SIGKILL"}),
            )
        ],
    )
    reports: list[RunReport] = []

    async def main() -> None:
        reports.append(
            await run_eval(
                project,
                host=StandinHost(),
                trials=1,
                limits={"pids": 256 if limited else "unlimited"},
            )
        )

    try:
        anyio.run(main)
        [trial] = reports[0].scenarios["killed"].trials
        assert trial.verdict == "infra-error", trial
        survivors = processes_with(marker)
        if limited:
            assert survivors == [], "the daemon outlived its trial's group"
            mine = f"atlante-eval-{os.getpid()}-"
            assert not [p for own in own_groups() for p in own.iterdir() if p.name.startswith(mine)]
        else:
            # The daemon may still be on its way to exec (its command line names the marker).
            assert wait_for(lambda: processes_with(marker), timeout_s=60), (
                "without limits the scrubbed daemon escapes (the gap limits close)"
            )
    finally:
        _kill(processes_with(marker))


def test_an_interrupted_run_removes_its_groups(tmp_path: Path) -> None:
    """SIGINT while a limited session and its daemon run: exit 3, no process, no group."""
    require_cgroups()
    marker = token()
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "stubborn",
                prompt=actions({"attack": "daemon", "args": [marker]}, {"sleep": 120}),
            )
        ],
    )
    args = ["run", str(project), "--trials", "1", "--limit", "pids=256"]
    with cleaned_up(start_cli(args, tmp_path)) as cli:
        try:
            wait_for(lambda: processes_with(marker) and hosts_running(cli.tmpdir))
            prefix = f"atlante-eval-{cli.pid}-"
            assert [p for own in own_groups() for p in own.iterdir() if p.name.startswith(prefix)]
            cli.signal(signal.SIGINT)
            status = cli.wait()
            assert status == 3
            assert processes_with(marker) == []
            assert not [
                p for own in own_groups() for p in own.iterdir() if p.name.startswith(prefix)
            ], "an interrupted run left a control group"
        finally:
            _kill(processes_with(marker))
