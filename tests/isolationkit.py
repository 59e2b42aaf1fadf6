"""Helpers for the isolation tests: the bwrap requirement, outside targets, a TCP server."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from atlante_eval import TrialResult

ATTACK_SCRIPT = Path(__file__).with_name("standin_host.py")


def require_bwrap() -> None:
    """Skip off Linux; without bwrap, fail in CI (it installs it) and skip elsewhere."""
    if not sys.platform.startswith("linux"):
        pytest.skip("OS isolation is Linux-only")
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bwrap is missing: .ci/run installs bubblewrap")
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")


@dataclass
class Listener:
    """A TCP server on 127.0.0.1 that records what each connection sent."""

    sock: socket.socket
    port: int
    """The port it listens on."""
    received: list[bytes] = field(default_factory=list)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                with contextlib.suppress(OSError):
                    self.received.append(conn.recv(1024))


@contextlib.contextmanager
def listener() -> Iterator[Listener]:
    """Serve a recording TCP listener on 127.0.0.1 for the block, then stop it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = Listener(sock, int(sock.getsockname()[1]))
    thread = threading.Thread(target=server._serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        thread.join(timeout=10)


@contextlib.contextmanager
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process outside every sandbox, ended after the block."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()


def processes_with(token: str) -> list[int]:
    """Pids of live processes whose command line contains ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


def kill_groups(pids: list[int]) -> None:
    """SIGKILL the process groups of ``pids`` (daemons a `none` run let escape)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


_OUTCOME = re.compile(r'\{"attack": .*?\}(?=\n|$)', re.M)


def outcomes(trial: TrialResult, *, agent_only: bool = False) -> dict[str, dict[str, Any]]:
    """Attack outcomes a trial reported: in its diff (agent) or check output (checks)."""
    texts = [trial.diff or ""]
    if not agent_only:
        texts += [str(c.evidence.get("output", "")) for c in trial.checks or []]
    found: dict[str, dict[str, Any]] = {}
    for text in texts:
        for match in _OUTCOME.finditer(text):
            outcome = json.loads(match.group(0))
            found[outcome["attack"]] = outcome
    return found


#: ``run`` arguments for a CLI run as ``nobody`` under ``os``: the default per-trial
#: control-group limits are unavailable to an unprivileged user without a delegated
#: cgroup subtree (``eval-limits-unavailable``), and the attacks run as ``nobody``
#: do not depend on them.
NO_CGROUP_LIMITS = ["--limit", "memoryMb=unlimited", "--limit", "pids=unlimited"]


async def wait_for_file(pattern: str, root: Path) -> Path:
    """Wait for a file matching ``pattern`` under ``root`` (the engine makes it)."""
    while True:
        found = sorted([Path(p) async for p in anyio.Path(root).glob(pattern)])
        if found:
            return found[0]
        await anyio.sleep(0.02)


async def release_fifo(fifo: Path) -> None:
    """Open the FIFO's write end once its reader is there, and close it (EOF)."""
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            await anyio.sleep(0.02)
            continue
        os.close(fd)
        return
