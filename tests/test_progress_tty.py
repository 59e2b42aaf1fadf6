"""The live status line on a real pseudo-terminal: its clock ticks, its totals, no garbling."""

from __future__ import annotations

import errno
import os
import pty
import re
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from clikit import ENTRY, cli_env, kill_marked
from factory import make_project, scenario
from standin import actions

STATUS = re.compile(
    r"(\d+)/(\d+) done · (\d+) running · \d+ pass · \d+ fail · \d+ timeout · \d+ error · "
    r"\d+ other · (\d+:\d\d)"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def tty_env(tmpdir: Path) -> dict[str, str]:
    """The CLI environment for a terminal: colour allowed, a capable TERM, wide columns."""
    env = cli_env(tmpdir)
    env.pop("NO_COLOR", None)
    env.update({"TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"})
    return env


def run_on_pty(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    enough: Callable[[str], bool] = lambda _: False,
    stdout_tty: bool = False,
) -> tuple[str, bool, int]:
    """Run ``argv`` with stderr (and optionally stdout) on a pty; read it all.

    Returns everything read, whether ``enough(text so far)`` became true while the
    process was still running, and the exit status. Reading synchronises on output:
    it blocks on the terminal, not on the clock.
    """
    master, slave = pty.openpty()
    out = slave if stdout_tty else subprocess.DEVNULL
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=slave,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    reached = False
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError as exc:
                if exc.errno == errno.EIO:  # the other side closed: the process exited
                    break
                raise
            if not data:
                break
            chunks.append(data)
            if not reached and process.poll() is None:
                reached = enough(b"".join(chunks).decode("utf-8", "replace"))
        code = process.wait(timeout=60)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait()
    return b"".join(chunks).decode("utf-8", "replace"), reached, code


def quiet_project(root: Path) -> Path:
    """One scenario whose stand-in session prints nothing for about three seconds."""
    return make_project(
        root,
        scenarios=[
            scenario(
                "quiet",
                prompt=actions({"sleep": 3}, {"write": "x.txt", "content": "x"}),
                checks=[{"type": "file-exists", "path": "x.txt"}],
            )
        ],
        eval_extra={"budget": {"trials": 1}},
    )


def clocks_while_running(text: str) -> set[str]:
    """Distinct clock values of status lines drawn while the trial was running."""
    return {m.group(4) for m in STATUS.finditer(text) if m.group(3) == "1"}


def run_quiet(
    tmp_path: Path, *options: str, enough: Callable[[str], bool] = lambda _: False
) -> tuple[str, bool, int]:
    """Run ``run --jobs 1 OPTIONS`` on :func:`quiet_project`, stderr on a pty (see run_on_pty)."""
    root = quiet_project(tmp_path / "project")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    try:
        return run_on_pty(
            [sys.executable, str(ENTRY), "run", str(root), "--jobs", "1", *options],
            env=tty_env(tmpdir),
            cwd=tmp_path,
            enough=enough,
        )
    finally:
        kill_marked(tmpdir)


@pytest.mark.timeout(180)
def test_status_clock_ticks_during_a_quiet_session(tmp_path: Path) -> None:
    """The clock advances while the host is silent, and totals are right from the start."""
    text, ticked, code = run_quiet(
        tmp_path, enough=lambda so_far: len(clocks_while_running(so_far)) >= 2
    )
    assert code == 0, text
    assert ticked, f"the clock did not advance during the session:\n{text!r}"
    totals = {m.group(2) for m in STATUS.finditer(text)}
    assert totals == {"1"}
    assert "0/0 done" not in text


def _visible_lines(text: str) -> list[str]:
    """What each terminal line shows: text after the last carriage return or line erase."""
    lines = []
    for segment in text.replace("\r\n", "\n").split("\n"):
        segment = re.split(r"\r|\x1b\[2K", segment)[-1]
        lines.append(_ANSI.sub("", segment))
    return lines


@pytest.mark.timeout(180)
def test_console_logs_print_above_the_status_line(tmp_path: Path) -> None:
    """--log-format console lines never share a terminal line with the status line."""
    text, _, code = run_quiet(tmp_path, "--log-format", "console")
    assert code == 0, text
    lines = _visible_lines(text)
    logs = [line for line in lines if "run.start" in line or "run.end" in line]
    assert len(logs) >= 2, text
    for line in logs:
        assert " done · " not in line, f"log line garbled by the status line: {line!r}"
        assert "preparing the run" not in line, f"log line garbled by the status line: {line!r}"


@pytest.mark.timeout(180)
def test_show_on_a_terminal_highlights_the_diff_and_still_escapes(tmp_path: Path) -> None:
    """On a terminal show styles its output; an escape sequence from evidence stays text."""
    command = [sys.executable, "-c", "print('\\x1b]0;owned\\x07'); raise SystemExit(1)"]
    root = make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "alpha",
                prompt=actions({"write": "x.txt", "content": "done\n"}),
                checks=[{"type": "command", "run": command}],
            )
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = cli_env(tmpdir)
    try:
        subprocess.run(
            [sys.executable, str(ENTRY), "run", str(root)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            check=False,
        )
        text, _, code = run_on_pty(
            [str(Path(sys.executable).with_name("atlante-eval")), "show", "--project", str(root)],
            env=tty_env(tmpdir),
            cwd=tmp_path,
            stdout_tty=True,
        )
        assert code == 0, text
        [run_dir] = [p for p in (root / ".atlante" / "eval").iterdir() if p.is_dir()]
        text, _, code = run_on_pty(
            [str(Path(sys.executable).with_name("atlante-eval")), "show", str(run_dir), "alpha:0"],
            env=tty_env(tmpdir),
            cwd=tmp_path,
            stdout_tty=True,
        )
    finally:
        kill_marked(tmpdir)
    assert code == 0, text
    assert "\x1b[" in text  # styled: verdict colour and the highlighted diff
    assert "\x1b]0;owned" not in text
    assert "\\x1b]0;owned\\x07" in text
    plain = _ANSI.sub("", text)
    assert "+done" in plain
