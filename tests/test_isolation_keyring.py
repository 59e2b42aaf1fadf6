"""Issue 23, item 4: the engine's session keyring is unreadable inside the sandbox.

The CLI under test holds a canary key in its own session keyring (as a Kerberos
``KEYRING:`` cache or aws-vault's keyctl backend would). The agent (a program its
session runs) and a command check both search their session keyring for it and
read it. Against the weakened engine (:mod:`weakened_isolation`, ``keyring``: the
confined processes inherit the engine's keyring) both read the canary into the
report; against the engine as it is, each confined process has a fresh, empty,
anonymous session keyring and finds nothing. As root and as ``nobody``.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from clikit import cleaned_up, report_dirs, start_cli
from factory import make_project, scenario
from isolationkit import NO_CGROUP_LIMITS, require_bwrap
from keyringkit import READER
from standin import actions
from unprivileged import give_to_nobody, nobody_python, nobody_workspace, run_cli_as_nobody

from atlante_eval import RunReport


def _project(root: Path, python: str) -> Path:
    return make_project(
        root,
        scenarios=[
            scenario(
                "keyring",
                prompt=actions({"run": [python, "reader.py", "agent-found.txt"]}),
                checks=[{"type": "command", "run": [python, "reader.py"]}],
            )
        ],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "reader.py": READER}},
        eval_extra={"budget": {"trials": 1}},
    )


def _found(project: Path) -> tuple[str, str]:
    """What the agent wrote (in the trial's diff) and what the check printed."""
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    trial = report.scenarios["keyring"].trials[0]
    [check] = trial.checks or []
    agent = next(
        (line[1:] for line in (trial.diff or "").splitlines() if line.startswith("+keyring:")),
        "",
    )
    return agent, str(check.evidence.get("output", ""))


ARGS = ["--isolation", "os", "--no-history"]


@pytest.mark.parametrize("weakened", [True, False], ids=["weakened", "defended"])
def test_the_session_keyring_canary_is_unreadable_as_root(tmp_path: Path, weakened: bool) -> None:
    """Weakened: agent and check read the canary; defended: 'Required key not available'."""
    require_bwrap()
    canary = f"CANARY-{uuid.uuid4().hex}"
    project = _project(tmp_path / "project", sys.executable)
    extra = {"ATLANTE_TEST_SESSION_CANARY": canary}
    if weakened:
        extra["ATLANTE_TEST_WEAKEN"] = "keyring"
    with cleaned_up(start_cli(["run", str(project), *ARGS], tmp_path, extra_env=extra)) as cli:
        status = cli.wait(timeout_s=300)
    assert status in (0, 1), cli.stderr
    agent, check = _found(project)
    if weakened:
        assert agent == f"keyring: read {canary}"
        assert check == f"keyring: read {canary}"
        return
    assert agent == "keyring: Required key not available"
    assert check == "keyring: Required key not available"


@pytest.mark.parametrize("weakened", [True, False], ids=["weakened", "defended"])
def test_the_session_keyring_canary_is_unreadable_as_nobody(
    monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """The same as an unprivileged user, whose own keyring holds the canary."""
    require_bwrap()
    canary = f"CANARY-{uuid.uuid4().hex}"
    monkeypatch.setenv("ATLANTE_TEST_SESSION_CANARY", canary)
    if weakened:
        monkeypatch.setenv("ATLANTE_TEST_WEAKEN", "keyring")
    with nobody_workspace() as base:
        project = _project(base / "project", nobody_python())
        give_to_nobody(base)
        done = run_cli_as_nobody(["run", str(project), *ARGS, *NO_CGROUP_LIMITS], base)
        assert done.returncode in (0, 1), done.stderr
        agent, check = _found(project)
    expected = f"keyring: read {canary}" if weakened else "keyring: Required key not available"
    assert (agent, check) == (expected, expected)
