"""An agent cannot crash the run through cleanup, nor hide files behind permissions.

Every run here is the whole CLI as the unprivileged user ``nobody`` (see
:mod:`unprivileged`), because ``chmod 000`` stops nobody but root. The agent
(the stand-in host) makes 1,200 nested directories, locks directories with
``chmod 000`` and ``chmod 500``, hides a file in an unreadable directory, and
plants a directory it cannot remove. The report must be published with the true
verdicts, and the run root removed or, where it truly cannot be, reported.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from clikit import processes_marked, report_dirs, run_dirs
from factory import make_project, scenario
from standin import actions
from unprivileged import give_to_nobody, nobody_python, nobody_workspace, run_cli_as_nobody

from atlante_eval import RunReport

X = {"write": "x.txt", "content": "done\n"}
X_EXISTS = {"type": "file-exists", "path": "x.txt"}
DEPTH = 1200
#: 1,200 nested directories with a file at the bottom, without recursion.
NEST = (
    "import os\n"
    f"for _ in range({DEPTH}):\n"
    "    os.mkdir('d')\n"
    "    os.chdir('d')\n"
    "open('deep.txt', 'w').write('deep')\n"
)
STASH = (
    {"mkdir": "stash"},
    {"write": "stash/stray.py", "content": "x\n"},
    {"chmod": "stash", "mode": 0},
)


def _python(code: str) -> dict[str, Any]:
    return {"run": [nobody_python(), "-c", code]}


def _report(project: Path) -> RunReport:
    [run_dir] = report_dirs(project)
    return RunReport.model_validate_json((run_dir / "report.json").read_bytes())


def _run_as_nobody(
    base: Path, docs: list[dict[str, Any]]
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Make a project of ``docs`` (one trial each), give it to ``nobody`` and run it there."""
    project = make_project(
        base / "project",
        scenarios=docs,
        eval_extra={"budget": {"trials": 1, "maxSessions": 50}},
    )
    give_to_nobody(project)
    return project, run_cli_as_nobody(["run", str(project), "--jobs", "2"], base)


def _verdicts(report: RunReport) -> dict[str, str]:
    return {name: result.trials[0].verdict for name, result in report.scenarios.items()}


def test_locked_and_deep_trees_are_graded_and_removed_as_nobody() -> None:
    """Deep nesting, chmod 000/500, a file in an unreadable dir: true verdicts, nothing left."""
    with nobody_workspace() as base:
        allow_x = {"type": "diff-allowlist", "allow": ["x.txt"]}
        docs = [
            scenario("stash", prompt=actions(X, *STASH), checks=[X_EXISTS, allow_x]),
            scenario(
                "stash-listed",
                prompt=actions(X, *STASH),
                checks=[{"type": "diff-allowlist", "allow": ["x.txt", "stash/stray.py"]}],
            ),
            scenario("deep", prompt=actions(X, _python(NEST)), checks=[X_EXISTS]),
            scenario(
                "locked",
                prompt=actions(
                    X,
                    {"write": "locked/inner/f.txt", "content": "f\n"},
                    {"chmod": "locked/inner", "mode": 0},
                    {"chmod": "locked", "mode": 0o500},
                ),
                checks=[X_EXISTS],
            ),
        ]
        project, done = _run_as_nobody(base, docs)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        report = _report(project)
        assert _verdicts(report) == {
            "deep": "pass",
            "locked": "pass",
            "stash": "fail",
            "stash-listed": "pass",
        }
        stash = report.scenarios["stash"].trials[0]
        assert stash.checks is not None
        assert stash.checks[1].evidence["unexpected"] == ["stash/stray.py"]
        assert stash.changed_files == ["stash/stray.py", "x.txt"]
        deep = report.scenarios["deep"].trials[0]
        assert deep.changed_files == ["d/" * DEPTH + "deep.txt", "x.txt"]
        locked = report.scenarios["locked"].trials[0]
        assert locked.changed_files == ["locked/inner/f.txt", "x.txt"]
        assert report.meta.cleanup_failures is None
        assert "eval-cleanup-failed" not in done.stdout + done.stderr
        assert run_dirs(base / "tmp") == []
        assert processes_marked(base / "tmp") == []


def test_a_sandbox_that_cannot_be_removed_is_reported_and_the_run_goes_on() -> None:
    """A planted tree ``nobody`` cannot delete is named in the report; every trial is graded."""
    with nobody_workspace() as base:
        trap = base / "trap"
        (trap / "sub").mkdir(parents=True)
        (trap / "sub" / "kept.txt").write_text("root's\n")
        trap.chmod(0o777)  # nobody may move it, not empty it: trap/sub stays root's, mode 755
        plant = _python(f"import os; os.rename({str(trap)!r}, 'trap')")
        docs = [
            scenario("planted", prompt=actions(plant, X), checks=[X_EXISTS]),
            scenario("plain", prompt=actions(X), checks=[X_EXISTS]),
        ]
        project, done = _run_as_nobody(base, docs)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        report = _report(project)
        assert _verdicts(report) == {"planted": "pass", "plain": "pass"}
        assert report.meta.cleanup_failures is not None
        [failure] = report.meta.cleanup_failures
        assert failure.path.endswith("/project/trap/sub/kept.txt")
        assert failure.reason == "Permission denied"
        assert "eval-cleanup-failed" in done.stdout + done.stderr
        published = json.loads((report_dirs(project)[0] / "report.json").read_text())
        assert published["meta"]["cleanupFailures"][0]["path"] == failure.path
        [left] = run_dirs(base / "tmp")
        assert [p.name.startswith("planted-trial-0-") for p in left.iterdir()] == [True]
        assert not Path(trap).exists()
