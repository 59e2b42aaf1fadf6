"""Issue 24 (part A): a newcomer's first hour, round three, each stumble through the command line.

Commands that need no host run the installed ``atlante-eval`` console script;
``run`` goes through ``tests/standin_cli.py`` (the same CLI with the stand-in host).
"""

from __future__ import annotations

import json
from pathlib import Path

from clikit import report_dirs
from factory import make_project, scenario
from standin import actions
from test_newcomer import console, standin_run

WRITES = actions({"write": "out.txt", "content": "x"})
OUT_CHECK = [{"type": "file-exists", "path": "out.txt"}]


def _passing(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "p",
        scenarios=[
            scenario("first", prompt=WRITES, checks=OUT_CHECK),
            scenario("second", prompt=WRITES, checks=OUT_CHECK),
        ],
        eval_extra={"budget": {"trials": 1}},
    )


def test_last_failed_after_an_all_pass_run_runs_and_publishes_nothing(tmp_path: Path) -> None:
    """--last-failed when nothing failed: says so, exit 0, no run directory, nothing recorded."""
    root = _passing(tmp_path)
    status, _out, err = standin_run(tmp_path, str(root), name="all-pass")
    assert status == 0, err
    [first] = report_dirs(root)
    status, out, err = standin_run(tmp_path, str(root), "--last-failed", name="again")
    assert status == 0, err
    assert out == ""
    assert err.splitlines()[:3] == [
        f"warning [last-failed]: --last-failed: nothing to rerun: every selected scenario "
        f"passed in run {first.name} ({first / 'report.json'}); nothing was run or published",
        f"at: {first / 'report.json'}",
        "next: run without --last-failed to run every scenario again",
    ]
    assert report_dirs(root) == [first]
    listed = console("history", "list", "--project", str(root), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [run["runId"] for run in json.loads(listed.stdout)] == [first.name]
