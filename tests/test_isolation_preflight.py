"""``--isolation``: the setting, its one resolver, and the preflight that refuses before any trial.

The missing mechanism is made real: a ``PATH`` without ``bwrap``, a ``bwrap`` that
fails the way a kernel without user namespaces makes it fail, and a non-Linux
platform. Each is ``eval-isolation-unavailable`` with exit 3, from ``run``,
``selftest`` and ``validate --probe``, and no trial runs (no report directory).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import typing
from pathlib import Path
from typing import get_args

import anyio
import pytest
from factory import make_project, scenario
from isolationkit import require_bwrap
from standin import StandinHost
from typer.testing import CliRunner, Result

from atlante_eval import RunOptions, hosts, run_eval, run_selftest
from atlante_eval.choices import IsolationMode
from atlante_eval.cli import app
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.isolation.bwrap import Confinement
from atlante_eval.isolation.preflight import require_os_isolation
from atlante_eval.project.config import EvalConfig, load_project
from atlante_eval.run.isolate import ISOLATION_MODES, isolation_mode

REFUSING_BWRAP = """#!/bin/sh
echo "bwrap: setting up uid map: Permission denied" >&2
exit 1
"""


def _path_without_bwrap(tmp_path: Path) -> str:
    """A PATH holding what a run needs (git, sh) but no bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("git", "sh"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def _refusing_path(tmp_path: Path) -> str:
    bin_dir = Path(_path_without_bwrap(tmp_path))
    fake = bin_dir / "bwrap"
    fake.write_text(REFUSING_BWRAP, encoding="utf-8")
    fake.chmod(0o755)
    return str(bin_dir)


def _code(exc: DiagnosticError) -> str:
    [diagnostic] = exc.diagnostics
    return diagnostic.code


def test_not_linux_is_refused() -> None:
    """macOS (and any non-Linux platform) is refused, never silently unconfined."""
    with pytest.raises(DiagnosticError) as caught:
        require_os_isolation(platform="darwin")
    assert _code(caught.value) == "eval-isolation-unavailable"
    assert caught.value.exit_code == 3
    assert "darwin" in caught.value.diagnostics[0].message


def test_missing_bwrap_is_refused(tmp_path: Path) -> None:
    """No bwrap on PATH: the diagnostic says how to install it."""
    with pytest.raises(DiagnosticError) as caught:
        require_os_isolation(env={"PATH": _path_without_bwrap(tmp_path)}, platform="linux")
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "eval-isolation-unavailable"
    assert diagnostic.next is not None
    assert "apt-get install bubblewrap" in diagnostic.next


def test_refused_namespaces_are_reported_with_bwraps_words(tmp_path: Path) -> None:
    """A bwrap the kernel refuses: the cause is bwrap's message, next says how to enable."""
    with pytest.raises(DiagnosticError) as caught:
        require_os_isolation(env={"PATH": _refusing_path(tmp_path)}, platform="linux")
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "eval-isolation-unavailable"
    assert "uid map: Permission denied" in str(diagnostic.cause)
    assert diagnostic.next is not None
    assert "user namespaces" in diagnostic.next


def test_working_bwrap_passes() -> None:
    """Where bubblewrap works the preflight returns its path."""
    require_bwrap()
    assert Path(require_os_isolation()).name == "bwrap"


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _no_run_dirs(project: Path) -> bool:
    base = project / ".atlante" / "eval"
    return not base.exists() or not any(p.is_dir() for p in base.iterdir())


@pytest.mark.parametrize("command", ["run", "selftest", "validate"])
def test_cli_refuses_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """run --isolation os, selftest --isolation os and validate --probe exit 3 at once."""
    extra = {"isolation": "os"} if command == "validate" else None
    project = make_project(tmp_path / "project", eval_extra=extra)
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    args = {
        "run": ["run", str(project), "--isolation", "os"],
        "selftest": ["selftest", str(project), "--isolation", "os"],
        "validate": ["validate", str(project), "--probe"],
    }[command]
    result = _invoke(*args)
    assert result.exit_code == 3, result.output
    assert "eval-isolation-unavailable" in result.output
    assert _no_run_dirs(project)


def test_project_setting_is_used_and_the_option_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval.isolation "os" applies to a run; run_eval(isolation="none") overrides it."""
    project = make_project(tmp_path / "project", eval_extra={"isolation": "os"})
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(lambda: run_eval(project, host=StandinHost(), trials=1))
    assert _code(caught.value) == "eval-isolation-unavailable"
    report = anyio.run(lambda: run_eval(project, host=StandinHost(), trials=1, isolation="none"))
    assert report.meta.isolation is None


def test_selftest_refuses_through_the_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_selftest(isolation="os") refuses the same way."""
    project = make_project(tmp_path / "project")
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(lambda: run_selftest(project, isolation="os"))
    assert _code(caught.value) == "eval-isolation-unavailable"


def test_unknown_isolation_is_an_invalid_option(tmp_path: Path) -> None:
    """A value other than none/os is exit 2, before anything runs."""
    project = make_project(tmp_path / "project")
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(lambda: run_eval(project, host=StandinHost(), isolation="vm"))
    assert _code(caught.value) == "invalid-option"
    assert caught.value.exit_code == 2
    result = _invoke("run", str(project), "--isolation", "vm")
    assert result.exit_code == 2


def test_project_keys(tmp_path: Path) -> None:
    """eval.isolation and eval.network.allow load; omitted they default; bad ones are exit 2."""
    plain = load_project(make_project(tmp_path / "plain"))
    assert plain.eval.isolation == "none"
    assert plain.eval.network.allow == []
    chosen = load_project(
        make_project(
            tmp_path / "chosen",
            eval_extra={
                "isolation": "os",
                "network": {"allow": ["registry.npmjs.org", "127.0.0.1:8080", "https://x.test/"]},
            },
        )
    )
    assert chosen.eval.isolation == "os"
    assert chosen.eval.network.allow[1] == "127.0.0.1:8080"
    for bad in ({"isolation": "vm"}, {"network": {"allow": ["host:99999"]}}):
        with pytest.raises(DiagnosticError) as caught:
            load_project(make_project(tmp_path / f"bad{len(json.dumps(bad))}", eval_extra=bad))
        assert caught.value.exit_code == 2


def test_the_confinement_works_for_an_unprivileged_user() -> None:
    """The same bwrap command line runs as nobody (no root, no setuid bwrap needed)."""
    require_bwrap()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    base = Path(tempfile.mkdtemp(prefix="atlante-nobody-", dir="/tmp"))
    try:
        base.chmod(0o755)
        root = base / "sandbox"
        root.mkdir()
        os.chown(root, 65534, 65534)
        confine = Confinement(bwrap=require_os_isolation(), state_dir=root, writable=(root,))
        plan = confine(
            ["/bin/sh", "-c", "id -u; echo inside > made.txt; ls /root 2>&1 || true"],
            root,
            {"PATH": "/usr/bin:/bin"},
        )
        unprivileged = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *plan.argv]
        try:
            result = subprocess.run(
                unprivileged,
                env=plan.env,
                capture_output=True,
                text=True,
                check=False,
                pass_fds=plan.pass_fds,
            )
        finally:
            if plan.after_exit is not None:
                plan.after_exit()  # closes the seccomp program's pipe
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0] == "65534"
        assert (root / "made.txt").read_text() == "inside\n"
        assert "No such file or directory" in result.stdout  # no /root inside
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_selftest_under_os_isolation(tmp_path: Path) -> None:
    """selftest --isolation os runs setup and command checks confined, and records it."""
    require_bwrap()
    secret = tmp_path / "outside.txt"
    secret.write_text("outside\n", encoding="utf-8")
    reads = ["/bin/sh", "-c", f"cat {secret} > seen.txt 2>&1; test -s README.md"]
    project = make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "confined",
                setup=reads,
                checks=[
                    {
                        "type": "command",
                        "run": ["/bin/sh", "-c", "grep -q 'No such file' seen.txt"],
                    },
                    {"type": "file-exists", "path": "never.txt"},
                ],
            )
        ],
    )
    outcome = anyio.run(lambda: run_selftest(project, isolation="os"))
    assert outcome.report.meta.isolation == "os"
    [null] = outcome.report.scenarios["confined"].trials
    assert null.checks is not None
    assert [c.verdict for c in null.checks] == ["pass", "fail"], null.checks


# -- one mode, one resolver for run and selftest ------------------------------------------

CONSOLE = Path(sys.executable).with_name("atlante-eval")


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed ``atlante-eval`` console script."""
    return subprocess.run(
        [str(CONSOLE), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


def test_a_bad_mode_is_the_same_diagnostic_from_run_selftest_and_the_api(tmp_path: Path) -> None:
    """run and selftest (console script), run_eval and run_selftest: one invalid-option, exit 2."""
    project = make_project(tmp_path / "project")
    expected = "--isolation must be one of: none, os (got 'vm')"
    run = _console("run", str(project), "--isolation", "vm")
    selftest = _console("selftest", str(project), "--isolation", "vm")
    assert run.returncode == selftest.returncode == 2
    assert run.stderr == selftest.stderr
    assert run.stderr.startswith(f"error [invalid-option]: {expected}\n")
    assert "Traceback" not in run.stderr
    calls = (
        lambda: run_eval(project, host=StandinHost(), isolation="vm"),
        lambda: run_selftest(project, isolation="vm"),
    )
    for call in calls:
        with pytest.raises(DiagnosticError) as caught:
            anyio.run(call)
        assert [(d.code, d.message) for d in caught.value.diagnostics] == [
            ("invalid-option", expected)
        ]
        assert caught.value.exit_code == 2
    assert _no_run_dirs(project)


@pytest.mark.parametrize("command", ["run", "selftest"])
def test_run_and_selftest_take_the_projects_mode_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """eval.isolation "os" refuses both where bwrap is missing; --isolation none overrides it."""
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    project = make_project(tmp_path / "project", eval_extra={"isolation": "os"})
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    refused = _invoke(command, str(project))
    assert refused.exit_code == 3, refused.output
    assert "eval-isolation-unavailable" in refused.output
    assert _no_run_dirs(project)
    overridden = _invoke(command, str(project), "--isolation", "none", "--json")
    assert overridden.exit_code in (0, 1), overridden.output
    assert "eval-isolation-unavailable" not in overridden.output
    report = project / ".atlante" / "eval"
    [published] = list(report.glob("*/report.json"))
    assert "isolation" not in json.loads(published.read_text())["meta"]


def test_one_isolation_mode_literal() -> None:
    """eval.isolation, RunOptions.isolation and the resolver's modes are the one IsolationMode."""
    assert typing.get_type_hints(EvalConfig)["isolation"] is IsolationMode
    assert typing.get_type_hints(RunOptions)["isolation"] == IsolationMode | None
    assert get_args(IsolationMode) == ISOLATION_MODES == ("none", "os")
    for mode in ISOLATION_MODES:
        assert isolation_mode(mode) == mode
    assert isolation_mode(None) is None
