"""Issue 23, item 6: an error inside the isolation layer says its cause, not ``ExceptionGroup``.

Under ``--isolation os`` each trial's proxies are served by task groups around
the trial, so whatever ends a trial inside them left as ``unexpected error:
ExceptionGroup: unhandled errors in a TaskGroup``, its cause (and ``setup.log``)
lost. Each failure is performed for real under ``os``: a setup that exits 1, a
setup program that does not exist, a full disk (the run's ``TMPDIR`` a 2 MiB
tmpfs in a private mount namespace, a fixture of 8 MiB: ``ENOSPC``), and an agent
that opens connections to its proxy until the engine runs out of descriptors
(``EMFILE``). Against the weakened engine (:mod:`weakened_isolation`, ``groups``)
each says ``ExceptionGroup``; against the engine as it is, each says its cause,
as the same trial does under ``none``.
"""

from __future__ import annotations

import ctypes
import os
import resource
from pathlib import Path

import anyio
import pytest
import weakened_isolation
from clikit import cleaned_up, report_dirs, start_cli
from factory import make_project, scenario
from isolationkit import require_bwrap
from standin import StandinHost, actions

from atlante_eval import RunReport, run_eval
from atlante_eval.choices import IsolationMode
from atlante_eval.report import TrialResult

OPAQUE = "unexpected error: ExceptionGroup"
SETUPS = {
    "exit-1": ["sh", "-c", "echo setup-stdout; echo setup-stderr >&2; exit 1"],
    "missing": ["./no-such-setup"],
}


def _trial(tmp_path: Path, setup: list[str], mode: IsolationMode) -> TrialResult:
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("broken", prompt=actions(), setup=setup)],
    )
    report = anyio.run(
        lambda: run_eval(project, host=StandinHost(), isolation=mode, trials=1, history=False)
    )
    return report.scenarios["broken"].trials[0]


@pytest.mark.parametrize("setup", list(SETUPS))
def test_weakened_engine_hides_a_setup_failure_in_an_exception_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str
) -> None:
    """Weakened: under os, the failed setup is ``unexpected error: ExceptionGroup``."""
    require_bwrap()
    weakened_isolation.apply(["groups"], monkeypatch.setattr)
    trial = _trial(tmp_path, SETUPS[setup], "os")
    assert trial.verdict == "infra-error"
    assert (trial.error or "").startswith(OPAQUE), trial.error
    assert trial.host_evidence is None


@pytest.mark.parametrize("setup", list(SETUPS))
def test_setup_failure_under_os_says_its_cause_as_under_none(tmp_path: Path, setup: str) -> None:
    """Now: ``setup failed: exit 1: …`` (or why it cannot start) and setup.log, as under none."""
    require_bwrap()
    confined = _trial(tmp_path / "os", SETUPS[setup], "os")
    plain = _trial(tmp_path / "none", SETUPS[setup], "none")
    for trial in (confined, plain):
        assert trial.verdict == "infra-error"
        assert (trial.error or "").startswith("setup failed: "), trial.error
        assert "ExceptionGroup" not in (trial.error or "")
    cause = (confined.error or "").split(" (full output:")[0]
    assert cause == (plain.error or "").split(" (full output:")[0]
    if setup == "exit-1":
        assert cause.startswith("setup failed: exit 1: setup-stderr"), cause
        assert confined.host_evidence is not None
        [run_dir] = report_dirs(tmp_path / "os" / "project")
        log = run_dir / str(confined.host_evidence["setupLog"])
        assert "setup-stdout" in log.read_text(encoding="utf-8")
        assert f"(full output: {confined.host_evidence['setupLog']})" in (confined.error or "")
    else:
        assert "No such file or directory" in cause, cause


# -- ENOSPC: the run's temporary directory on a full file system ---------------------------

_CLONE_NEWNS = 0x00020000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


def _small_tmpfs(directory: Path) -> None:
    """In the CLI's child: a private mount namespace where ``directory`` is a 2 MiB tmpfs."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
    if libc.mount(b"tmpfs", os.fsencode(directory), b"tmpfs", 0, b"size=2m,mode=0700") != 0:
        raise OSError(ctypes.get_errno(), "mount tmpfs")


def _cli_trial(
    tmp_path: Path, project: Path, *, weaken: str | None, preexec: object
) -> TrialResult:
    extra = {"ATLANTE_TEST_WEAKEN": weaken} if weaken else {}
    args = ["run", str(project), "--isolation", "os", "--no-history"]
    run = start_cli(args, tmp_path, extra_env=extra, preexec=preexec)  # type: ignore[arg-type]
    with cleaned_up(run) as cli:
        status = cli.wait(timeout_s=300)
    assert status == 1, cli.stderr
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    [result] = report.scenarios.values()
    return result.trials[0]


@pytest.mark.parametrize("weakened", [True, False], ids=["weakened", "defended"])
def test_a_full_disk_under_os_says_enospc(tmp_path: Path, weakened: bool) -> None:
    """The sandbox cannot be assembled on a full disk: weakened ExceptionGroup, now ENOSPC."""
    require_bwrap()
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("big", prompt=actions())],
        eval_extra={"budget": {"trials": 1}},
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "big.bin": "x" * (8 << 20)}},
    )
    tmpdir = tmp_path / "cli-tmp"
    tmpdir.mkdir()
    trial = _cli_trial(
        tmp_path,
        project,
        weaken="groups" if weakened else None,
        preexec=lambda: _small_tmpfs(tmpdir),
    )
    assert trial.verdict == "infra-error"
    if weakened:
        assert (trial.error or "").startswith(OPAQUE), trial.error
        return
    assert "ExceptionGroup" not in (trial.error or "")
    assert "No space left on device" in (trial.error or ""), trial.error


# -- EMFILE: an agent holding connections to its proxy until the engine has no descriptor ----

#: The engine's limit on open files in this test (soft and hard: the engine raises its
#: soft limit to the hard one at start, and the agent inherits the same).
ENGINE_FILES = 256
#: Connections the agent holds open to its proxy, as many as its own limit lets it:
#: with the engine's own descriptors, more than the engine can accept.
FLOOD = f"""
import resource, signal, socket
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for _ in range(4 * {ENGINE_FILES}):
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(10)
        conn.connect("/run/atlante/proxy.sock")
    except OSError:
        break
    held.append(conn)
signal.pause()
"""


def _few_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (ENGINE_FILES, ENGINE_FILES))


@pytest.mark.parametrize("weakened", [True, False], ids=["weakened", "defended"])
def test_proxy_out_of_descriptors_under_os_says_emfile(tmp_path: Path, weakened: bool) -> None:
    """The proxy cannot accept (EMFILE): weakened ExceptionGroup, now the proxy and EMFILE."""
    require_bwrap()
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("flood", prompt=actions({"run": ["python3", "-c", FLOOD]}))],
    )
    trial = _cli_trial(tmp_path, project, weaken="groups" if weakened else None, preexec=_few_files)
    assert trial.verdict == "infra-error"
    if weakened:
        assert (trial.error or "").startswith(OPAQUE), trial.error
        return
    assert trial.error == (
        "the trial's network proxy stopped accepting connections: Too many open files (EMFILE)"
    )
