"""Under ``os`` isolation no process outlives its trial, nor the engine.

A session that ignores SIGTERM and leaves a setsid daemon (with a scrubbed
environment, so the engine's marker sweep cannot find it) is ended by its
timeout: the PID namespace takes the daemon with it. And when the engine itself
is SIGKILLed mid-session, ``--die-with-parent`` ends the sandbox.
"""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import anyio
from clikit import cleaned_up, hosts_running, start_cli, wait_for
from factory import make_project, scenario
from isolationkit import kill_groups, processes_with, require_bwrap
from standin import StandinHost, actions

from atlante_eval import run_eval
from atlante_eval.isolation.bwrap import Confinement
from atlante_eval.isolation.preflight import require_os_isolation
from atlante_eval.trial import run_process


def _project(tmp_path: Path, token: str) -> Path:
    prompt = actions(
        {"ignore_sigterm": True},
        {"attack": "daemon", "args": [token]},
        {"grandchild": 600},
        {"sleep": 600},
    )
    return make_project(
        tmp_path / "project",
        scenarios=[scenario("stubborn", prompt=prompt, budget={"timeoutMs": 1500})],
    )


def test_timeout_ends_the_whole_sandbox(tmp_path: Path) -> None:
    """The trial times out, and its daemon, grandchild and host are all gone when it ends."""
    require_bwrap()
    token = f"atlante-lifetime-{uuid.uuid4().hex}"
    project = _project(tmp_path, token)
    try:
        report = anyio.run(lambda: run_eval(project, host=StandinHost(), isolation="os", trials=1))
        left = processes_with(token)
    finally:
        kill_groups(processes_with(token))
    [trial] = report.scenarios["stubborn"].trials
    assert trial.verdict == "timeout", trial.error
    assert left == []


def test_killed_engine_takes_its_sandboxes_with_it(tmp_path: Path) -> None:
    """SIGKILL of the engine mid-session: the host, its grandchild and its daemon die."""
    require_bwrap()
    token = f"atlante-orphan-{uuid.uuid4().hex}"
    project = _project(tmp_path, token)
    run = start_cli(["run", str(project), "--isolation", "os", "--trials", "1"], tmp_path)
    try:
        with cleaned_up(run) as cli:
            wait_for(lambda: processes_with(token) and hosts_running(cli.tmpdir), timeout_s=60)
            cli.signal(signal.SIGKILL)
            cli.wait()
            wait_for(lambda: not processes_with(token) and not hosts_running(cli.tmpdir))
    finally:
        kill_groups(processes_with(token))


def test_a_timed_out_confined_process_still_gets_sigterm_first(tmp_path: Path) -> None:
    """The grace period holds under os: the confined process sees SIGTERM, not a bare kill."""
    require_bwrap()
    confine = Confinement(bwrap=require_os_isolation(), state_dir=tmp_path, writable=(tmp_path,))
    script = "trap 'echo got-term; exit 3' TERM; echo up; sleep 600 & wait"
    result = anyio.run(
        lambda: run_process(
            ["/bin/sh", "-c", script],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            timeout_s=1,
            grace_s=30,
            wrap=confine,
        )
    )
    assert result.timed_out
    assert result.stdout.splitlines() == ["up", "got-term"]
    assert result.returncode == 3
