"""Issue 23, item 5: inspecting a kept sandbox with git runs no code the agent wrote.

The agent sets ``core.fsmonitor``, ``core.pager`` and ``core.hooksPath`` (a
post-checkout hook) in its sandbox's ``.git/config``, reaches the same through an
``include.path``, and plants a nested repository with its own ``core.fsmonitor``
behind a gitlink in the index (git enters it to see whether it changed). After
``run --keep``, the commands docs/sandbox.md gives, and a checkout, are run on
the kept sandbox as a user would. Against the weakened engine
(:mod:`weakened_isolation`, ``kept``) the payloads run; against the engine as it
is, none does and ``git diff atlante-eval`` still shows the agent's edit.
"""

from __future__ import annotations

import contextlib
import os
import pty
import subprocess
from pathlib import Path

import anyio
import pytest
import weakened_isolation
from factory import make_project, scenario
from isolationkit import require_bwrap
from standin import StandinHost, actions

from atlante_eval import run_eval
from atlante_eval.choices import IsolationMode
from atlante_eval.trial.kept import NEUTRAL_CONFIG

PLANT = """#!/bin/sh
set -e
marker="$1"
git config core.fsmonitor "touch $marker/top-fsmonitor;"
git config core.pager "touch $marker/pager; cat"
mkdir -p .myhooks
printf '#!/bin/sh\\ntouch %s/hook\\n' "$marker" > .myhooks/post-checkout
chmod +x .myhooks/post-checkout
git config core.hooksPath "$PWD/.myhooks"
mkdir -p sub/inner
printf '[core]\\n\\tpager = touch %s/include-pager; cat\\n' "$marker" > sub/inner/evil.cfg
git config include.path "$PWD/sub/inner/evil.cfg"
cd sub
git init -q .
echo b > b
git add b
git -c user.name=a -c user.email=a@a.invalid commit -qm sub
git config core.fsmonitor "touch $marker/sub-fsmonitor;"
cd ..
git update-index --add --cacheinfo "160000,$(git -C sub rev-parse HEAD),sub"
echo "changed by the agent" > README.md
"""
#: What a user inspecting the kept sandbox runs (docs/sandbox.md, and a checkout).
INSPECT = (
    ["diff", "atlante-eval"],
    ["status"],
    ["log", "--oneline"],
    ["checkout", "-q", "-b", "inspect"],
)


def _git(project: Path, args: list[str], env: dict[str, str]) -> str:
    """Run git on a terminal (a pseudo-terminal), as a user at a shell: it pages there."""
    main, terminal = pty.openpty()
    try:
        done = subprocess.run(
            ["git", "-C", str(project), *args],
            env=env,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            timeout=120,  # a hang guard
            check=False,
        )
        os.close(terminal)
        terminal = -1
        chunks = []
        with contextlib.suppress(OSError):  # EIO once everything was read
            while chunk := os.read(main, 65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace") + f"[exit {done.returncode}]"
    finally:
        os.close(main)
        if terminal >= 0:
            os.close(terminal)


def _inspect(project: Path, home: Path) -> list[str]:
    """Run the inspection commands as a user would.

    ``PAGER=cat`` stands in for the user's pager (``less`` would wait for a key on
    the terminal); git prefers ``core.pager`` to ``PAGER``, so an agent-written
    pager still wins over it when the configuration is left in place.
    """
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
        "TERM": "dumb",
        "PAGER": "cat",
    }
    return [_git(project, list(args), env) for args in INSPECT]


@pytest.mark.parametrize(
    ("mode", "weakened"),
    [("os", True), ("os", False), ("none", False)],
    ids=["os-weakened", "os", "none"],
)
def test_kept_sandbox_inspection_runs_no_agent_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: IsolationMode, weakened: bool
) -> None:
    """Weakened: fsmonitor, pager, include, nested fsmonitor and hook run; now none does."""
    if mode == "os":
        require_bwrap()
    markers = tmp_path / "markers"
    markers.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "plant",
                prompt=actions({"run": ["sh", "plant.sh", str(markers)]}),
                checks=[{"type": "file-contains", "path": "README.md", "pattern": "agent"}],
            )
        ],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "plant.sh": PLANT}},
    )
    monkeypatch.chdir(project)
    if weakened:
        weakened_isolation.apply(["kept"], monkeypatch.setattr)
    report = anyio.run(
        lambda: run_eval(
            project, host=StandinHost(), isolation=mode, trials=1, keep=True, history=False
        )
    )
    trial = report.scenarios["plant"].trials[0]
    assert trial.verdict == "pass", trial.error
    assert trial.sandbox is not None
    kept = Path(trial.sandbox) / "project"
    for planted in markers.iterdir():  # under none, the agent's own git calls ran them
        planted.unlink()
    outputs = _inspect(kept, home)
    ran = sorted(path.name for path in markers.iterdir())
    if weakened:
        assert ran == ["hook", "include-pager", "sub-fsmonitor", "top-fsmonitor"], outputs
        return
    assert ran == [], outputs
    assert "+changed by the agent" in outputs[0]
    assert (kept / ".git" / "config").read_text(encoding="utf-8") == NEUTRAL_CONFIG
    assert (kept / "sub" / ".git" / "config").read_text(encoding="utf-8") == NEUTRAL_CONFIG
    assert list((kept / ".git" / "hooks").iterdir()) == []
