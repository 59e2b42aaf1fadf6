"""Control groups for per-trial resource limits: the file protocol shared by v1 and v2.

Every file operation goes through :class:`CgroupFS`, the one seam tests replace
with a simulated kernel (``tests/cgroupfake.py``). :func:`parse_mounts` finds the
cgroup hierarchies mounted here and the engine's own group in each;
:class:`TrialGroup` is one trial's group (one directory per v1 hierarchy): the
files a process joins it through, its limit events, its removal (every process
left in it killed first). Where groups are made, v2 or v1, is
:mod:`.hierarchies`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "CPU_PERIOD_US",
    "EMPTY_WAIT_S",
    "GROUP_PREFIX",
    "CgroupFS",
    "CgroupUnavailable",
    "CgroupVersion",
    "Controller",
    "Counters",
    "GroupLimits",
    "Mount",
    "TrialGroup",
    "parse_mounts",
    "pids_in",
    "remove_dirs",
    "why",
]

CgroupVersion = Literal["v2", "v1"]
Controller = Literal["memory", "pids", "cpu"]
#: Prefix of every group this engine creates (the run groups, the engine's v2 leaf).
GROUP_PREFIX = "atlante-eval-"
#: The CFS period written with a CPU quota (100 ms, the kernel's default).
CPU_PERIOD_US = 100_000
#: How long removing a trial's group waits for its killed processes to exit.
EMPTY_WAIT_S = 10.0


class CgroupUnavailable(Exception):
    """Raised by :func:`find_hierarchy` and :meth:`Hierarchy.open` when no group can be made.

    ``reasons`` says, per hierarchy tried, what it lacked.
    """

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = tuple(reasons)


class CgroupFS:
    """The file operations on cgroup file systems (the seam tests replace).

    Interface files are written without ``O_CREAT`` semantics mattering (the
    kernel refuses new files) and read whole; they are small and never block.
    """

    def read(self, path: Path) -> str:
        """The text of ``path``."""
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    def write(self, path: Path, text: str) -> None:
        """Write ``text`` to the existing interface file ``path`` in one call."""
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def exists(self, path: Path) -> bool:
        """Whether ``path`` exists."""
        return os.path.exists(path)

    def writable(self, path: Path) -> bool:
        """Whether this process may create groups in ``path``."""
        return os.access(path, os.W_OK)

    def listdir(self, path: Path) -> list[str]:
        """The entries of the group ``path``: its interface files and child groups."""
        return os.listdir(path)

    def mkdir(self, path: Path) -> None:
        """Create the group ``path`` (the kernel fills in its interface files)."""
        os.mkdir(path, 0o755)

    def rmdir(self, path: Path) -> None:
        """Remove the empty group ``path``."""
        os.rmdir(path)

    def kill(self, pid: int, group: Path) -> None:
        """SIGKILL ``pid`` if it is still in ``group`` (checked through a pidfd: no reused pid)."""
        _kill_member(pid, group)


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """What one trial's group enforces (``None``: that controller is not limited)."""

    memory_bytes: int | None = None
    pids: int | None = None
    cpu_quota_us: int | None = None
    """CPU time per :data:`CPU_PERIOD_US`."""

    def controllers(self) -> frozenset[Controller]:
        """The controllers these limits need."""
        found: set[Controller] = set()
        if self.memory_bytes is not None:
            found.add("memory")
        if self.pids is not None:
            found.add("pids")
        if self.cpu_quota_us is not None:
            found.add("cpu")
        return frozenset(found)


@dataclass(frozen=True, slots=True)
class Counters:
    """A group's limit events so far (each counter only grows)."""

    oom_kills: int = 0
    """Processes the kernel killed because the group reached its memory limit."""
    memory_max: int = 0
    """Times the group's memory reached its limit (v1 ``failcnt``, v2 ``max`` events)."""
    pids_max: int = 0
    """Forks refused because the group had ``pids`` processes."""


@dataclass(frozen=True, slots=True)
class Mount:
    """One mounted cgroup hierarchy and the engine's own group in it."""

    version: CgroupVersion
    controllers: frozenset[str]
    """v1: the controllers bound to the hierarchy (v2: empty, read per group)."""
    own: Path
    """The engine's own group: mount point plus its cgroup path."""
    mountpoint: Path


def parse_mounts(mountinfo: str, cgroup: str) -> list[Mount]:
    """The cgroup mounts in ``/proc/self/mountinfo`` whose root holds our own group.

    ``cgroup`` is ``/proc/self/cgroup``. A hierarchy mounted more than once
    appears once (its first usable mount).
    """
    paths: dict[str, str] = {}
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            key = "" if parts[0] == "0" and not parts[1] else parts[1]
            for name in key.split(",") if key else [""]:
                paths[name] = parts[2]
    found: list[Mount] = []
    seen: set[str] = set()
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        root, mountpoint = _unescape(fields[3]), _unescape(fields[4])
        tail = line.split(" - ", 1)[1].split()
        if len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        if tail[0] == "cgroup2":
            version: CgroupVersion = "v2"
            controllers: frozenset[str] = frozenset()
            key = ""
        else:
            version = "v1"
            controllers = frozenset(o for o in tail[2].split(",") if o in ("memory", "pids", "cpu"))
            if not controllers:
                continue
            key = sorted(controllers)[0]
        own_path = paths.get(key)
        if own_path is None or key in seen:
            continue
        relative = os.path.relpath(own_path, root)
        if relative.startswith(".."):
            continue
        seen.add(key)
        own = Path(mountpoint) if relative == "." else Path(mountpoint) / relative
        found.append(Mount(version, controllers, own, Path(mountpoint)))
    return found


def _unescape(text: str) -> str:
    """A mountinfo path with its octal escapes (``\\040`` for a space) decoded."""
    return text.encode().decode("unicode_escape") if "\\" in text else text


def _fields(text: str) -> dict[str, int]:
    """``key value`` lines (``memory.events``, ``pids.events``, ``cpu.stat``) as a dict."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            found[parts[0]] = int(parts[1])
    return found


def pids_in(text: str) -> list[int]:
    return [int(word) for word in text.split() if word.isdigit()]


@dataclass
class TrialGroup:
    """One trial's group (one directory per v1 hierarchy): join it, read it, remove it."""

    version: CgroupVersion
    dirs: tuple[Path, ...]
    """The group's directory in each hierarchy (one under v2)."""
    fs: CgroupFS = field(repr=False)

    @property
    def procs_files(self) -> tuple[Path, ...]:
        """The files a process writes its pid into to join the group (before it execs)."""
        return tuple(d / "cgroup.procs" for d in self.dirs)

    def counters(self) -> Counters:
        """The group's limit events so far."""
        return _v2_counters(self) if self.version == "v2" else _v1_counters(self)

    def cpu_stat(self) -> dict[str, int]:
        """The group's ``cpu.stat`` (throttling: ``nr_throttled``), empty without one."""
        for directory in self.dirs:
            path = directory / "cpu.stat"
            if self.fs.exists(path):
                return _fields(self.fs.read(path))
        return {}

    def members(self) -> list[int]:
        """The processes in the group now."""
        found: set[int] = set()
        for directory in self.dirs:
            with contextlib.suppress(OSError):
                found.update(pids_in(self.fs.read(directory / "cgroup.procs")))
        return sorted(found)

    def remove(self) -> str | None:
        """Kill every process left in the group, wait for them, remove the group.

        Returns what could not be removed (``None``: all gone). Never raises.
        """
        deadline = time.monotonic() + EMPTY_WAIT_S
        kill = self.dirs[0] / "cgroup.kill"
        if self.version == "v2" and self.fs.exists(kill):
            with contextlib.suppress(OSError):
                self.fs.write(kill, "1")
        pause = 0.001
        while True:
            left = self.members()
            if not left:
                break
            if time.monotonic() > deadline:
                return f"{len(left)} process(es) would not leave {self.dirs[0]}"
            for pid in left:
                for directory in self.dirs:
                    self.fs.kill(pid, directory)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return remove_dirs(self.fs, self.dirs, deadline)


def remove_dirs(fs: CgroupFS, dirs: Iterable[Path], deadline: float) -> str | None:
    """Remove each empty group directory, retrying while the kernel still counts exiting tasks."""
    for directory in dirs:
        pause = 0.001
        while fs.exists(directory):
            try:
                fs.rmdir(directory)
            except OSError as exc:
                if time.monotonic() > deadline:
                    return f"cannot remove {directory}: {exc.strerror or exc}"
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
    return None


def _v1_counters(group: TrialGroup) -> Counters:
    oom = memory_max = pids_max = 0
    for directory in group.dirs:
        oom_control = directory / "memory.oom_control"
        if group.fs.exists(oom_control):
            oom = _fields(group.fs.read(oom_control)).get("oom_kill", 0)
            memory_max = int(group.fs.read(directory / "memory.failcnt").strip() or 0)
        events = directory / "pids.events"
        if group.fs.exists(events):
            pids_max = _fields(group.fs.read(events)).get("max", 0)
    return Counters(oom_kills=oom, memory_max=memory_max, pids_max=pids_max)


def _v2_counters(group: TrialGroup) -> Counters:
    directory = group.dirs[0]
    memory: dict[str, int] = {}
    pids: dict[str, int] = {}
    if group.fs.exists(directory / "memory.events"):
        memory = _fields(group.fs.read(directory / "memory.events"))
    if group.fs.exists(directory / "pids.events"):
        pids = _fields(group.fs.read(directory / "pids.events"))
    return Counters(
        oom_kills=memory.get("oom_kill", 0),
        memory_max=memory.get("max", 0),
        pids_max=pids.get("max", 0),
    )


def why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _kill_member(pid: int, group: Path) -> None:
    """SIGKILL ``pid`` through a pidfd after checking it is still a member of ``group``."""
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    if pidfd_open is None or send is None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return
    try:
        pidfd = pidfd_open(pid)
    except OSError:
        return
    try:
        with open(group / "cgroup.procs", encoding="utf-8") as handle:
            if pid in pids_in(handle.read()):
                send(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)
