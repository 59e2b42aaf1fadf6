"""Every isolation attack of issue 11, performed for real, twice.

Each attack runs once from the stand-in host (the agent) and once from a command
check (the daemon also from ``setup``). Under ``none`` it must get through, which
proves each test can see the breach; under ``os`` it must fail, and the trial still
gets its truthful verdict (``pass``: the agent did its task, writing hello.txt).
Outcomes are judged outside the sandbox wherever the breach leaves a trace there
(the secret in the report, the fixture's bytes, the sleeper alive, the server's
log, a leftover process), and by the attack's own report otherwise.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from factory import make_project, scenario
from isolationkit import (
    ATTACK_SCRIPT,
    kill_groups,
    listener,
    outcomes,
    processes_with,
    require_bwrap,
    sleeper,
)
from standin import StandinHost, actions

from atlante_eval import RunReport, run_eval

Mode = Literal["none", "os"]
Runner = Literal["agent", "check"]
ORIGINAL = "original data\n"


@dataclass
class Targets:
    """What lives outside every sandbox, made by the test."""

    project: Path
    secret: Path
    secret_text: str
    fixture_file: Path
    outside_file: Path
    kill_pid: int
    ptrace_pid: int
    port: int
    daemon_token: str
    setup_daemon_token: str

    def attacks(self) -> dict[str, list[str]]:
        """Attack name -> arguments, one scenario each."""
        return {
            "read": [str(self.secret)],
            "write": [str(self.fixture_file), "PWNED-write\n"],
            "outside": [str(self.outside_file), "PWNED-outside\n"],
            "kill": [str(self.kill_pid)],
            "ptrace": [str(self.ptrace_pid)],
            "loopback": ["127.0.0.1", str(self.port)],
            "hostname": ["localhost", str(self.port)],
            "daemon": [self.daemon_token],
            "proc": [str(self.fixture_file), "PWNED-proc\n"],
            "symlink": [str(self.secret)],
        }


#: Scenario name -> the attack it performs (two scenarios use ``write``/``connect``).
KIND = {
    "read": "read",
    "write": "write",
    "outside": "write",
    "kill": "kill",
    "ptrace": "ptrace",
    "loopback": "connect",
    "hostname": "connect",
    "daemon": "daemon",
    "proc": "proc",
    "symlink": "symlink",
}


def _scenarios(targets: Targets, runner: Runner) -> list[dict[str, Any]]:
    hello = {"write": "hello.txt", "content": "hello\n"}
    docs = []
    for name, args in targets.attacks().items():
        kind = KIND[name]
        checks: list[dict[str, Any]] = [{"type": "file-exists", "path": "hello.txt"}]
        if runner == "agent":
            prompt = actions(hello, {"attack": kind, "args": args})
        else:
            prompt = actions(hello)
            checks.append(
                {"type": "command", "run": [sys.executable, "attack.py", "--attack", kind, *args]}
            )
        docs.append(scenario(name, prompt=prompt, checks=checks))
    docs.append(
        scenario(
            "setupdaemon",
            prompt=actions(hello),
            checks=[{"type": "file-exists", "path": "hello.txt"}],
            setup=[sys.executable, "attack.py", "--attack", "daemon", targets.setup_daemon_token],
        )
    )
    return docs


def _run(project: Path, mode: Mode) -> RunReport:
    return anyio.run(
        lambda: run_eval(project, host=StandinHost(), isolation=mode, trials=1, jobs=4)
    )


@pytest.mark.parametrize("runner", ["agent", "check"])
@pytest.mark.parametrize("mode", ["none", "os"])
def test_attacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: Mode, runner: Runner
) -> None:
    """Under none every attack gets through; under os none does, and verdicts stay true."""
    if mode == "os":
        require_bwrap()
    home = tmp_path / "user-home"
    secret = home / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret_text = f"SECRET-{uuid.uuid4().hex}"
    secret.write_text(secret_text, encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))  # the user's home, as the run sees it
    outside = tmp_path / "elsewhere" / "notes.txt"
    outside.parent.mkdir()
    outside.write_text(ORIGINAL, encoding="utf-8")
    project = tmp_path / "project"
    with sleeper() as victim, sleeper() as traced, listener() as server:
        targets = Targets(
            project=project,
            secret=secret,
            secret_text=secret_text,
            fixture_file=project / "eval" / "fixtures" / "target" / "data.txt",
            outside_file=outside,
            kill_pid=victim.pid,
            ptrace_pid=traced.pid,
            port=server.port,
            daemon_token=f"atlante-daemon-{uuid.uuid4().hex}",
            setup_daemon_token=f"atlante-setup-daemon-{uuid.uuid4().hex}",
        )
        make_project(
            project,
            scenarios=_scenarios(targets, runner),
            fixtures={
                "eval/fixtures/app": {
                    "README.md": "hello\n",
                    "attack.py": ATTACK_SCRIPT.read_text(encoding="utf-8"),
                },
                "eval/fixtures/target": {"data.txt": ORIGINAL},
            },
        )
        monkeypatch.chdir(project)  # the engine's cwd is the project, as for a user
        try:
            report = _run(project, mode)
            daemons = processes_with(targets.daemon_token)
            setup_daemons = processes_with(targets.setup_daemon_token)
        finally:
            kill_groups(processes_with(targets.daemon_token))
            kill_groups(processes_with(targets.setup_daemon_token))
        victim_alive = victim.poll() is None
        received = list(server.received)
    trials = {name: result.trials[0] for name, result in report.scenarios.items()}
    seen = {name: outcomes(trial).get(KIND.get(name, "")) for name, trial in trials.items()}
    text = report.to_json()
    fixture_now = targets.fixture_file.read_text(encoding="utf-8")
    outside_now = outside.read_text(encoding="utf-8")
    breached = {
        "read": secret_text in text and bool(seen["read"] and seen["read"]["breached"]),
        "symlink": bool(seen["symlink"] and seen["symlink"]["breached"]),
        "write": "PWNED-write" in fixture_now,
        "outside": "PWNED-outside" in outside_now,
        "proc": "PWNED-proc" in fixture_now,
        "kill": not victim_alive,
        "ptrace": bool(seen["ptrace"] and seen["ptrace"]["breached"]),
        "loopback": bool(seen["loopback"] and seen["loopback"]["breached"]),
        "hostname": bool(seen["hostname"] and seen["hostname"]["breached"]),
        "daemon": bool(daemons),
        "setupdaemon": bool(setup_daemons),
    }
    if mode == "none":
        assert breached == dict.fromkeys(breached, True), seen
        assert received, "the test server saw no connection"
        assert report.meta.isolation is None
        return
    assert breached == dict.fromkeys(breached, False), seen
    assert received == []
    assert fixture_now == ORIGINAL
    assert secret_text not in text
    assert report.meta.isolation == "os"
    for name, trial in trials.items():
        assert trial.verdict == "pass", (name, trial.error, trial.checks)
        if name != "setupdaemon":
            assert seen[name] is not None, f"{name}: the attack did not report"
    if runner == "agent":
        for name in ("loopback", "hostname"):
            host = "127.0.0.1" if name == "loopback" else "localhost"
            denied = trials[name].denied or []
            assert [(d.phase, d.target) for d in denied] == [("session", f"{host}:{targets.port}")]
    assert targets.secret.exists()
