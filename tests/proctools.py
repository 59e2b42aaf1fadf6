"""Helpers for tests that start real processes: liveness checks and small scripts."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def wait_dead(pids: list[int], timeout_s: float = 60.0) -> list[int]:
    """Wait until every pid is dead; return those still alive after ``timeout_s``.

    ``timeout_s`` is a hang guard, not a speed bound: it is half of
    :data:`PROGRAM_SLEEP_S`, so a pid found dead was ended, not left to finish.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        survivors = [pid for pid in pids if alive(pid)]
        if not survivors or time.monotonic() > deadline:
            return survivors
        time.sleep(0.02)


def read_pids(path: Path, count: int, timeout_s: float = 60.0) -> list[int]:
    """Wait until ``path`` lists ``count`` pids (one per line) and return them.

    ``timeout_s`` is a hang guard (the program writes the file as it starts).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pids = [int(line) for line in path.read_text().split()]
        except (OSError, ValueError):
            pids = []
        if len(pids) >= count or time.monotonic() > deadline:
            return pids
        time.sleep(0.02)


def kill_quietly(pids: list[int]) -> None:
    """SIGKILL leftover processes so a failing test does not leak them."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


#: How long STUBBORN and ESCAPER sleep: a caller that returns sooner ended them (or
#: stopped waiting for them); it did not wait them out.
PROGRAM_SLEEP_S = 120

#: A program that ignores SIGTERM, forks a grandchild that also ignores it and keeps
#: stdout/stderr open, writes both pids to the file named by argv[1], then sleeps.
STUBBORN = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    time.sleep(PROGRAM_SLEEP_S)
    os._exit(0)
with open(sys.argv[1], "w") as handle:
    handle.write(f"{os.getpid()}\n{pid}\n")
print("ready", flush=True)
time.sleep(PROGRAM_SLEEP_S)
""".replace("PROGRAM_SLEEP_S", str(PROGRAM_SLEEP_S))

#: Like STUBBORN, but the grandchild leaves the process group (setsid) first.
ESCAPER = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(PROGRAM_SLEEP_S)
    os._exit(0)
with open(sys.argv[1], "w") as handle:
    handle.write(f"{os.getpid()}\n{pid}\n")
print("ready", flush=True)
time.sleep(PROGRAM_SLEEP_S)
""".replace("PROGRAM_SLEEP_S", str(PROGRAM_SLEEP_S))
