"""Run the CLI as a real subprocess and inspect what a run leaves behind.

Every run started here gets its own ``TMPDIR``. The engine creates its run root
there, and every process it starts (hosts, their grandchildren, checks, git)
inherits that ``TMPDIR``, so the processes and temporary directories of one test
can be found without confusing them with anybody else's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ENTRY = Path(__file__).with_name("standin_cli.py")


@dataclass(frozen=True)
class Proc:
    """One live process as ``ps -eo pid,ppid,pgid,args`` would show it."""

    pid: int
    ppid: int
    pgid: int
    args: str


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def processes_marked(tmpdir: Path) -> list[Proc]:
    """Live (non-zombie) processes whose environment has ``TMPDIR`` below ``tmpdir``."""
    marker = f"TMPDIR={tmpdir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if not any(item.startswith(marker) for item in environ.split(b"\0")):
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or fields[0] in ("Z", "X"):
            continue
        args = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
        found.append(Proc(int(entry.name), int(fields[1]), int(fields[2]), args))
    return found


def hosts_running(tmpdir: Path) -> list[Proc]:
    """The stand-in host processes (and their forked grandchildren) of a run."""
    return [p for p in processes_marked(tmpdir) if "standin_host.py" in p.args]


def kill_marked(tmpdir: Path) -> None:
    """SIGKILL every process of a run (cleanup after a failing or crashing test)."""
    for proc in processes_marked(tmpdir):
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signal.SIGKILL)


def wait_for(condition: Callable[[], Any], timeout_s: float = 120.0, step_s: float = 0.02) -> Any:
    """Poll ``condition`` until it returns something true; fail the test on timeout.

    ``timeout_s`` is a hang guard far above any run's duration, not a speed bound.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout_s}s: {condition}")
        time.sleep(step_s)


def run_dirs(tmpdir: Path) -> list[Path]:
    """The ``atlante-eval-*`` run roots left in a run's temporary directory."""
    return sorted(tmpdir.glob("atlante-eval-*"))


def report_dirs(project: Path) -> list[Path]:
    """Run directories under the project's default report location.

    A hidden ``.<run id>.reserving`` directory is a run directory still being
    reserved (report/staging.py), not yet one.
    """
    base = project / ".atlante" / "eval"
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def journal_results(run_dir: Path) -> list[dict[str, Any]]:
    """The complete trial lines of a run directory's journal (a torn line is skipped)."""
    path = run_dir / "journal.jsonl"
    if not path.exists():
        return []
    results = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and "result" in record:
                results.append(record)
    return results


@dataclass
class CliRun:
    """A running ``standin_cli.py`` process and where its output goes."""

    process: subprocess.Popen[bytes]
    tmpdir: Path
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        """The CLI's process id."""
        return self.process.pid

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the CLI process (not to its hosts)."""
        self.process.send_signal(sig)

    def wait(self, timeout_s: float = 60.0) -> int:
        """Wait for the CLI to exit and return its status."""
        return self.process.wait(timeout=timeout_s)

    @property
    def stdout(self) -> str:
        """Everything the CLI printed on stdout."""
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        """Everything the CLI printed on stderr."""
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def cli_env(tmpdir: Path, *, grace_s: float = 0.5, **extra: str) -> dict[str, str]:
    """The CLI's environment: ours, with its own ``TMPDIR`` and a short grace period."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({"TMPDIR": str(tmpdir), "ATLANTE_TEST_GRACE_S": str(grace_s), "NO_COLOR": "1"})
    env.update(extra)
    return env


def start_cli(
    args: list[str],
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    grace_s: float = 0.5,
    name: str = "cli",
    extra_env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> CliRun:
    """Start ``standin_cli.py ARGS`` in its own session, output going to files.

    ``env`` replaces the environment (default :func:`cli_env`); ``extra_env`` is
    added to the default one; ``preexec`` runs in the child before the CLI starts
    (e.g. to set a resource limit).
    """
    tmpdir = tmp_path / f"{name}-tmp"
    tmpdir.mkdir(exist_ok=True)
    stdout_path = tmp_path / f"{name}.stdout"
    stderr_path = tmp_path / f"{name}.stderr"
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, str(ENTRY), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env if env is not None else cli_env(tmpdir, grace_s=grace_s, **(extra_env or {})),
            start_new_session=True,
            preexec_fn=preexec,
        )
    return CliRun(process, tmpdir, stdout_path, stderr_path)


@contextlib.contextmanager
def cleaned_up(run: CliRun) -> Iterator[CliRun]:
    """Yield ``run``; afterwards kill whatever of it is still running."""
    try:
        yield run
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()
        kill_marked(run.tmpdir)


@contextlib.contextmanager
def isolated_tmpdir(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Iterator[Path]:
    """Point ``TMPDIR`` (and :mod:`tempfile`) of this process at ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("TMPDIR", str(directory))
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    try:
        yield directory
    finally:
        kill_marked(directory)


#: The installed ``atlante-eval`` console script of this environment.
CONSOLE = Path(sys.executable).with_name("atlante-eval")


def console(
    args: list[str],
    *,
    stdout: Any = subprocess.PIPE,
    cwd: Path | None = None,
    hang_guard_s: float = 120.0,
) -> subprocess.CompletedProcess[bytes]:
    """Run the installed console script; ``hang_guard_s`` only stops a hung test."""
    return subprocess.run(
        [str(CONSOLE), *args],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
            "NO_COLOR": "1",
        },
        timeout=hang_guard_s,
        check=False,
    )
