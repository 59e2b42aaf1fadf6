"""An unprivileged user without a delegated cgroup subtree: limits are refused before any trial.

Run as ``nobody`` (see :mod:`unprivileged`): this machine's v1 hierarchies belong
to root and its unified hierarchy has neither the controllers nor a group
``nobody`` may write. ``run`` with a limit and ``validate --probe`` with one
configured stop with ``eval-limits-unavailable`` (exit 3) before any trial,
naming why each hierarchy cannot be used and how to turn the limits off;
``--isolation os`` with the cgroup limits turned off still runs, its private
tmpfs mounts sized and watched without any control group.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from factory import make_project, scenario
from isolationkit import require_bwrap
from standin import actions
from unprivileged import give_to_nobody, nobody_workspace, run_cli_as_nobody

from atlante_eval import RunReport

TMP = """\
with open("/tmp/fill", "wb") as f:
    for _ in range(64):
        f.write(b"x" * (1 << 20))
"""


def _require_root() -> None:
    if not sys.platform.startswith("linux") or shutil.which("setpriv") is None:
        pytest.skip("needs Linux and setpriv to drop to nobody")
    if os.geteuid() != 0:
        pytest.skip("dropping to nobody needs root")


def _project(base: Path, *, limits: dict[str, object] | None = None) -> Path:
    project = make_project(
        base / "project",
        scenarios=[
            scenario(
                "fill",
                prompt=actions({"write": "a.txt", "content": "x"}),
                checks=[{"type": "command", "run": [sys.executable, "fill.py"]}],
            )
        ],
        fixtures={"eval/fixtures/app": {"README.md": "hi\n", "fill.py": TMP}},
        eval_extra={"limits": limits} if limits is not None else None,
    )
    give_to_nobody(project)
    return project


def _assert_refused(stderr: str, project: Path) -> None:
    assert "error [eval-limits-unavailable]" in stderr, stderr
    assert "cgroup v2" in stderr, "each hierarchy's reason is named"
    assert "cgroup v1" in stderr, "each hierarchy's reason is named"
    assert "--limit pids=unlimited" in stderr
    assert "running" not in stderr, "a trial started"
    assert not list((project / ".atlante").glob("eval/*/report.json"))


def test_run_with_a_limit_is_refused_before_any_trial() -> None:
    """``run --limit pids=256`` as nobody: exit 3, no trial, the reasons and the way out."""
    _require_root()
    with nobody_workspace() as base:
        project = _project(base)
        result = run_cli_as_nobody(
            ["run", str(project), "--trials", "1", "--limit", "pids=256"], base
        )
    assert result.returncode == 3, result.stderr
    _assert_refused(result.stderr, project)


def test_validate_probe_says_the_configured_limits_cannot_be_enforced() -> None:
    """``validate --probe`` with eval.limits as nobody: exit 3, in text and in JSON."""
    _require_root()
    with nobody_workspace() as base:
        project = _project(base, limits={"pids": 256, "memoryMb": 512})
        text = run_cli_as_nobody(["validate", str(project), "--probe"], base)
        as_json = run_cli_as_nobody(["validate", str(project), "--probe", "--json"], base)
    assert text.returncode == 3, text.stderr
    assert "error [eval-limits-unavailable]" in text.stderr
    assert "--limit memoryMb=unlimited --limit pids=unlimited" in text.stderr
    assert as_json.returncode == 3
    document = json.loads(as_json.stdout)
    assert document["ok"] is False
    assert [d["code"] for d in document["diagnostics"]] == ["eval-limits-unavailable"]


def test_os_isolation_without_cgroup_limits_still_sizes_the_tmpfs() -> None:
    """Under os, nobody's run is refused for its default limits, and runs once they are off:
    tmpMb needs no control group, and the sandbox's /tmp holds at most tmpMb."""
    _require_root()
    require_bwrap()
    with nobody_workspace() as base:
        project = _project(base)
        command = ["run", str(project), "--isolation", "os", "--trials", "1"]
        refused = run_cli_as_nobody(command, base)
        off = ["--limit", "pids=unlimited", "--limit", "memoryMb=unlimited", "--limit", "tmpMb=32"]
        ran = run_cli_as_nobody([*command, *off], base)
        [report_path] = (project / ".atlante" / "eval").glob("*/report.json")
        report = RunReport.model_validate_json(report_path.read_bytes())
    assert refused.returncode == 3
    assert "error [eval-limits-unavailable]" in refused.stderr
    assert ran.returncode == 1, ran.stderr
    assert report.meta.limits is not None
    assert report.meta.limits.model_dump(exclude_none=True) == {"tmp_mb": 32}
    [trial] = report.scenarios["fill"].trials
    assert trial.error is not None
    assert trial.error.startswith("tmp limit 32 MB reached (checks)"), trial.error
