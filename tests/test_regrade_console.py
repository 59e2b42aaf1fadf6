"""``regrade``, ``show --files`` and ``compare`` through the installed console script.

The run is made in process with the stand-in host. The console script then runs
in a fresh interpreter whose ``PATH`` holds tripwire ``opencode`` and ``claude``
executables: each records every invocation (a version probe included) and
exits. A regrade that started, or even probed, a host would leave a record;
``atlante-eval run`` through the same ``PATH`` does, which proves the tripwire
sees a host start.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from clikit import CONSOLE
from factory import make_project, scenario, write_json
from standin import StandinHost, actions

from atlante_eval import RunReport, run_eval

TRIPWIRE = """#!/bin/sh
echo "$0 $*" >> {log}
exit 1
"""


def _tripwires(tmp_path: Path) -> tuple[Path, Path]:
    """A directory of host executables that only record being run, and their log."""
    bin_dir = tmp_path / "tripwire-bin"
    bin_dir.mkdir()
    log = tmp_path / "host-starts.log"
    for name in ("opencode", "claude"):
        path = bin_dir / name
        path.write_text(TRIPWIRE.format(log=log))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir, log


def _console(args: list[str], bin_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the installed ``atlante-eval`` with the tripwires first on ``PATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"
    env["NO_COLOR"] = "1"
    result = subprocess.run(
        [str(CONSOLE), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,  # only stops a hung test
        check=False,
    )
    assert "Traceback" not in result.stdout + result.stderr
    return result


def _rewrite_checks(project: Path, name: str, checks: list[dict[str, Any]]) -> None:
    path = project / "eval" / "scenarios" / f"{name}.eval.json"
    document = json.loads(path.read_text())
    document["checks"] = checks
    write_json(path, document)


def test_the_console_script_regrades_without_a_host(tmp_path: Path) -> None:
    """A too strict check fixed in the document: the console's regrade passes the trials."""
    prompt = actions(
        {"write": "src/greeting.txt", "content": "Hello, World\n"},
        {"run": [sys.executable, "-c", "open('blob.bin', 'wb').write(bytes(range(256)))"]},
        {"delete": "README.md"},
    )
    strict = [{"type": "file-contains", "path": "src/greeting.txt", "pattern": "hello, world"}]
    project = make_project(
        tmp_path / "p",
        scenarios=[scenario("greet", prompt=prompt, checks=strict)],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "src/app.py": "print(1)\n"}},
    )
    original = anyio.run(
        lambda: run_eval(project, host=StandinHost(), trials=2, jobs=1, html=False)
    )
    assert [t.verdict for t in original.scenarios["greet"].trials] == ["fail", "fail"]
    run_dir = project / ".atlante" / "eval" / original.run_id
    bin_dir, log = _tripwires(tmp_path)

    _rewrite_checks(
        project,
        "greet",
        [
            {"type": "file-contains", "path": "src/greeting.txt", "pattern": "Hello, World"},
            {
                "type": "command",
                "run": [
                    sys.executable,
                    "-c",
                    "assert open('blob.bin', 'rb').read() == bytes(range(256))",
                ],
            },
            {"type": "file-absent", "path": "README.md"},
        ],
    )
    out = tmp_path / "regraded"
    result = _console(
        ["regrade", str(run_dir), "--project", str(project), "--out", str(out), "--json"], bin_dir
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert not log.exists(), log.read_text()
    regraded = RunReport.model_validate_json(result.stdout)
    assert regraded.meta.regraded_from == original.run_id
    new_dir = out / regraded.run_id
    assert (new_dir / "report.json").is_file()
    assert sorted(p.parent.name for p in (project / ".atlante" / "eval").glob("*/report.json")) == [
        original.run_id
    ]
    for trial in regraded.scenarios["greet"].trials:
        assert [c.verdict for c in trial.checks or []] == ["pass", "pass", "pass"]
        assert trial.regrade is not None
        assert (trial.regrade.status, trial.regrade.previous_verdict) == ("regraded", "fail")

    compared = _console(["compare", str(run_dir), str(new_dir)], bin_dir)
    assert compared.returncode == 0, compared.stderr
    assert "2 trials changed verdict" in compared.stdout

    shown = _console(["show", str(new_dir), "greet:0", "--files"], bin_dir)
    assert shown.returncode == 0, shown.stderr
    assert "deleted  README.md" in shown.stdout.splitlines()
    assert "written  blob.bin  mode 0644, 256 bytes, binary" in shown.stdout.splitlines()
    one = _console(["show", str(new_dir), "greet:1"], bin_dir)
    assert one.returncode == 0, one.stderr
    assert "regrade: regraded: was fail, now pass" in one.stdout.splitlines()
    view = json.loads(_console(["show", str(new_dir), "greet:1", "--json"], bin_dir).stdout)
    assert view["regrade"] == "regraded: was fail, now pass"
    assert "trials/greet/1/final-state.json" in view["files"]
    assert not log.exists(), log.read_text()

    # The tripwire sees a host: a run through the same PATH probes the host it would start.
    ran = _console(["run", str(project), "--trials", "1", "--no-html"], bin_dir)
    assert ran.returncode != 0
    assert "opencode" in log.read_text()


def test_the_console_script_refuses_a_changed_fixture(tmp_path: Path) -> None:
    """The fixture edited after the run: exit 2, the diagnostic's code, no report published."""
    prompt = actions({"write": "out.txt", "content": "x"})
    project = make_project(
        tmp_path / "p",
        scenarios=[scenario("task", prompt=prompt, checks=[{"type": "file-exists", "path": "no"}])],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n"}},
    )
    original = anyio.run(
        lambda: run_eval(project, host=StandinHost(), trials=1, jobs=1, html=False)
    )
    run_dir = project / ".atlante" / "eval" / original.run_id
    (project / "eval" / "fixtures" / "app" / "README.md").write_text("changed\n")
    _rewrite_checks(project, "task", [{"type": "file-exists", "path": "out.txt"}])
    bin_dir, log = _tripwires(tmp_path)
    result = _console(["regrade", str(run_dir), "--project", str(project)], bin_dir)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "regrade-task-changed" in result.stderr
    assert "its fixture's files" in result.stderr
    assert sorted(p.name for p in (project / ".atlante" / "eval").glob("*/report.json")) == [
        "report.json"
    ]
    assert not log.exists()
