"""Closing the terminal of a run (SIGHUP) ends it as SIGTERM does: report, cleanup, no host left.

The CLI runs on a real pseudo-terminal as its controlling terminal, with colour and
the live status line on. Closing the terminal's master side is what a terminal
emulator does when its window closes: the kernel sends the session SIGHUP, and
every later write to the terminal fails (EIO).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from clikit import (
    ENTRY,
    CliRun,
    cleaned_up,
    cli_env,
    hosts_running,
    processes_marked,
    report_dirs,
    run_dirs,
    wait_for,
)
from test_reliability_interrupts import (
    GRACE_S,
    STUBBORN_S,
    _assert_partial_report,
    _midway,
    _project,
)


def _controlling_terminal() -> None:
    """In the child: make the pseudo-terminal on stdin the session's controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _start_on_a_terminal(args: list[str], tmp_path: Path, *, weakened: bool) -> tuple[CliRun, int]:
    """Start ``standin_cli.py ARGS`` on a new pseudo-terminal; return it and the master fd."""
    master, slave = pty.openpty()
    tmpdir = tmp_path / "cli-tmp"
    tmpdir.mkdir()
    env = cli_env(tmpdir, grace_s=GRACE_S)
    env.pop("NO_COLOR")
    env["TERM"] = "xterm-256color"
    if weakened:
        env["ATLANTE_TEST_DEFAULT_SIGHUP"] = "1"
    process = subprocess.Popen(
        [sys.executable, str(ENTRY), *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        preexec_fn=_controlling_terminal,
    )
    os.close(slave)
    fcntl.fcntl(master, fcntl.F_SETFL, os.O_NONBLOCK)
    return CliRun(process, tmpdir, tmp_path / "none.out", tmp_path / "none.err"), master


def _drain(master: int) -> None:
    """Read what the terminal shows so far (so the CLI never blocks writing to it)."""
    with contextlib.suppress(OSError):
        while os.read(master, 65536):
            pass


@pytest.mark.parametrize("weakened", [False, True], ids=["sighup-interrupts", "weakened"])
def test_closing_the_terminal_publishes_a_partial_report_and_ends_every_host(
    tmp_path: Path, weakened: bool
) -> None:
    """SIGHUP from a closed terminal: partial report, run root removed, hosts ended, exit 3.

    Weakened (SIGHUP left to its default, as before): the CLI dies at once, without
    a report; the run root stays and the stubborn hosts keep running.
    """
    project = _project(tmp_path)
    args = ["run", str(project), "--jobs", "4"]
    cli, master = _start_on_a_terminal(args, tmp_path, weakened=weakened)
    with cleaned_up(cli):

        def midway() -> bool:
            _drain(master)
            return _midway(cli.tmpdir, project)

        wait_for(midway)
        os.close(master)  # the terminal window closes
        if weakened:
            assert cli.wait(timeout_s=STUBBORN_S / 2) == -signal.SIGHUP
            assert hosts_running(cli.tmpdir)  # the hosts outlive the engine
            assert run_dirs(cli.tmpdir)  # and so does the run root
            [run_dir] = report_dirs(project)
            assert not (run_dir / "report.json").exists()
            return
        wait_for(lambda: not hosts_running(cli.tmpdir), timeout_s=STUBBORN_S / 2)
        assert cli.wait(timeout_s=STUBBORN_S / 2) == 3
    assert processes_marked(cli.tmpdir) == []
    assert run_dirs(cli.tmpdir) == []
    _assert_partial_report(project)
