"""Control groups for per-trial resource limits: cgroup v2, or the v1 hierarchies.

A :class:`Hierarchy` is where this machine lets the engine create groups with
the controllers a run's limits need (``memory``, ``pids``, ``cpu``):

* **v2** (:class:`V2Hierarchy`): the unified hierarchy, when the engine's own
  cgroup has the controllers (a delegated subtree: the root, a container's
  cgroup, a ``systemd-run --scope -p Delegate=yes`` unit). The kernel allows
  controllers in a group's children only while the group holds no process, so
  when the engine's cgroup is not the root and the engine is alone in it, the
  engine moves itself into a leaf (``atlante-eval-engine-<pid>``) for the run
  and back afterwards.
* **v1** (:class:`V1Hierarchy`): one group per needed controller's hierarchy,
  below the engine's own group in each.

Either way a run owns one *run group* (``atlante-eval-<pid>-<token>``) and each
trial a group below it (:class:`TrialGroup`), whose limits are written before
any process joins it and which is emptied (every process killed) and removed
when the trial ends. Every file operation goes through :class:`CgroupFS`, the
one seam tests replace with a simulated kernel (``tests/cgroupfake.py``).

:func:`find_hierarchy` picks v2 where it has every needed controller, else v1,
else raises :class:`CgroupUnavailable` with what each lacked.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

__all__ = [
    "CgroupFS",
    "CgroupUnavailable",
    "CgroupVersion",
    "Controller",
    "Counters",
    "GroupLimits",
    "Hierarchy",
    "TrialGroup",
    "V1Hierarchy",
    "V2Hierarchy",
    "find_hierarchy",
    "parse_mounts",
    "sweep_stale",
]

CgroupVersion = Literal["v2", "v1"]
Controller = Literal["memory", "pids", "cpu"]
#: Prefix of every group this engine creates (the run groups, the engine's v2 leaf).
GROUP_PREFIX = "atlante-eval-"
#: The CFS period written with a CPU quota (100 ms, the kernel's default).
CPU_PERIOD_US = 100_000
#: How long removing a trial's group waits for its killed processes to exit.
_EMPTY_WAIT_S = 10.0


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


def _pids(text: str) -> list[int]:
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
                found.update(_pids(self.fs.read(directory / "cgroup.procs")))
        return sorted(found)

    def remove(self) -> str | None:
        """Kill every process left in the group, wait for them, remove the group.

        Returns what could not be removed (``None``: all gone). Never raises.
        """
        deadline = time.monotonic() + _EMPTY_WAIT_S
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
        return _remove_dirs(self.fs, self.dirs, deadline)


def _remove_dirs(fs: CgroupFS, dirs: Iterable[Path], deadline: float) -> str | None:
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


class Hierarchy(Protocol):
    """Where a run's groups live: opened once per run, a group per trial."""

    version: CgroupVersion

    def open(self) -> None:
        """Create the run group (and, under v2, enable the controllers for its trials).

        Raises:
            CgroupUnavailable: the groups cannot be made here after all.
        """

    def close(self) -> str | None:
        """Remove the run group and undo :meth:`open`; return what could not be undone."""

    def create(self, name: str, limits: GroupLimits) -> TrialGroup:
        """Create a trial's group with ``limits`` written, before any process joins it.

        Raises:
            OSError: the group could not be created or a limit not written.
        """


def _run_name() -> str:
    return f"{GROUP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"


def sweep_stale(fs: CgroupFS, parent: Path) -> int:
    """Remove the empty groups an engine that was killed outright left in ``parent``.

    A run group (``atlante-eval-<pid>-<token>``) or an engine leaf
    (``atlante-eval-engine-<pid>``) whose pid is no longer alive is removed with
    its empty trial groups; anything still holding a process stays. Returns how
    many run groups were removed.
    """
    removed = 0
    try:
        names = [n for n in fs.listdir(parent) if n.startswith(GROUP_PREFIX)]
    except OSError:
        return 0
    for name in names:
        owner = name.removeprefix(GROUP_PREFIX).removeprefix("engine-").split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        group = parent / name
        with contextlib.suppress(OSError):
            for child in fs.listdir(group):
                if fs.exists(group / child / "cgroup.procs"):
                    fs.rmdir(group / child)
            fs.rmdir(group)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class V1Hierarchy:
    """The cgroup v1 hierarchies of the needed controllers, below the engine's own groups."""

    owns: tuple[Path, ...]
    """The engine's own group in each needed hierarchy."""
    fs: CgroupFS = field(default_factory=CgroupFS, repr=False)
    version: CgroupVersion = "v1"
    _runs: tuple[Path, ...] = ()

    def open(self) -> None:
        """Create the run group in every hierarchy."""
        name = _run_name()
        made: list[Path] = []
        for own in self.owns:
            sweep_stale(self.fs, own)
        try:
            for own in self.owns:
                self.fs.mkdir(own / name)
                made.append(own / name)
        except OSError as exc:
            _remove_dirs(self.fs, made, time.monotonic())
            raise CgroupUnavailable(
                [f"cgroup v1: cannot create {own / name}: {_why(exc)}"]
            ) from None
        self._runs = tuple(made)

    def close(self) -> str | None:
        """Remove the run groups (their trial groups are gone already)."""
        runs, self._runs = self._runs, ()
        return _remove_dirs(self.fs, runs, time.monotonic() + _EMPTY_WAIT_S)

    def create(self, name: str, limits: GroupLimits) -> TrialGroup:
        """Create the trial's group in every hierarchy and write its limits."""
        dirs = tuple(run / name for run in self._runs)
        group = TrialGroup("v1", dirs, self.fs)
        try:
            for directory in dirs:
                self.fs.mkdir(directory)
                self._limit(directory, limits)
        except OSError:
            _remove_dirs(self.fs, dirs, time.monotonic() + _EMPTY_WAIT_S)
            raise
        return group

    def _limit(self, directory: Path, limits: GroupLimits) -> None:
        fs = self.fs
        if limits.memory_bytes is not None and fs.exists(directory / "memory.limit_in_bytes"):
            fs.write(directory / "memory.limit_in_bytes", str(limits.memory_bytes))
            swap = directory / "memory.memsw.limit_in_bytes"
            if fs.exists(swap):  # no swap either: the limit is the memory the trial may use
                fs.write(swap, str(limits.memory_bytes))
        if limits.pids is not None and fs.exists(directory / "pids.max"):
            fs.write(directory / "pids.max", str(limits.pids))
        if limits.cpu_quota_us is not None and fs.exists(directory / "cpu.cfs_quota_us"):
            fs.write(directory / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            fs.write(directory / "cpu.cfs_quota_us", str(limits.cpu_quota_us))


@dataclass
class V2Hierarchy:
    """The unified hierarchy, below the engine's own group (moving the engine when needed)."""

    own: Path
    """The engine's own group."""
    controllers: frozenset[Controller]
    """The controllers the run's trials need."""
    fs: CgroupFS = field(default_factory=CgroupFS, repr=False)
    version: CgroupVersion = "v2"
    _run: Path | None = None
    _enabled: tuple[str, ...] = ()
    """Controllers this run enabled in the engine's group (disabled again on close)."""
    _leaf: Path | None = None
    """The leaf the engine moved into (it moves back on close)."""

    def open(self) -> None:
        """Make the controllers available below the engine's group, then create the run group."""
        missing = self._missing()
        if missing:
            raise CgroupUnavailable([missing])
        sweep_stale(self.fs, self.own)
        try:
            self._delegate()
            run = self.own / _run_name()
            self.fs.mkdir(run)
            self._run = run
            wanted = " ".join(f"+{c}" for c in sorted(self.controllers))
            if wanted:
                self.fs.write(run / "cgroup.subtree_control", wanted)
        except OSError as exc:
            self.close()
            raise CgroupUnavailable([f"cgroup v2: {self.own}: {_why(exc)}"]) from None

    def _missing(self) -> str | None:
        """Why the engine's group cannot give its children the controllers, if it cannot."""
        try:
            available = set(self.fs.read(self.own / "cgroup.controllers").split())
        except OSError as exc:
            return f"cgroup v2: cannot read {self.own}/cgroup.controllers: {_why(exc)}"
        lacking = sorted(set(self.controllers) - available)
        if lacking:
            return (
                f"cgroup v2: the controllers {', '.join(lacking)} are not delegated to "
                f"{self.own} (it has: {', '.join(sorted(available)) or 'none'})"
            )
        if not self.fs.writable(self.own):
            return f"cgroup v2: {self.own} is not writable by this user"
        return None

    def _delegate(self) -> None:
        """Enable the controllers in the engine's group, first leaving it for a leaf if needed.

        Raises:
            OSError: the controllers cannot be enabled; CgroupUnavailable: other
                processes share the engine's group.
        """
        enabled = set(self.fs.read(self.own / "cgroup.subtree_control").split())
        wanted = sorted(set(self.controllers) - enabled)
        if not wanted:
            return
        # Only the hierarchy's real root has no cgroup.events, and only it may hold
        # processes while its children have controllers.
        if self.fs.exists(self.own / "cgroup.events"):
            others = [p for p in _pids(self.fs.read(self.own / "cgroup.procs")) if p != os.getpid()]
            if others:
                raise CgroupUnavailable(
                    [
                        f"cgroup v2: {self.own} holds {len(others)} other process(es), so its "
                        "children cannot get controllers (the no-internal-process rule)"
                    ]
                )
            leaf = self.own / f"{GROUP_PREFIX}engine-{os.getpid()}"
            self.fs.mkdir(leaf)
            self._leaf = leaf
            self.fs.write(leaf / "cgroup.procs", str(os.getpid()))
        self.fs.write(self.own / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
        self._enabled = tuple(wanted)

    def close(self) -> str | None:
        """Remove the run group, disable what :meth:`open` enabled, move the engine back."""
        problem = None
        run, self._run = self._run, None
        if run is not None:
            problem = _remove_dirs(self.fs, [run], time.monotonic() + _EMPTY_WAIT_S)
        enabled, self._enabled = self._enabled, ()
        leaf, self._leaf = self._leaf, None
        try:
            if enabled:
                self.fs.write(
                    self.own / "cgroup.subtree_control", " ".join(f"-{c}" for c in enabled)
                )
            if leaf is not None:
                self.fs.write(self.own / "cgroup.procs", str(os.getpid()))
                self.fs.rmdir(leaf)
        except OSError as exc:
            problem = problem or f"cannot restore {self.own}: {_why(exc)}"
        return problem

    def create(self, name: str, limits: GroupLimits) -> TrialGroup:
        """Create the trial's group below the run group and write its limits."""
        assert self._run is not None, "open() first"
        directory = self._run / name
        self.fs.mkdir(directory)
        try:
            self._limit(directory, limits)
        except OSError:
            _remove_dirs(self.fs, [directory], time.monotonic() + _EMPTY_WAIT_S)
            raise
        return TrialGroup("v2", (directory,), self.fs)

    def _limit(self, directory: Path, limits: GroupLimits) -> None:
        fs = self.fs
        if limits.memory_bytes is not None:
            fs.write(directory / "memory.max", str(limits.memory_bytes))
            if fs.exists(directory / "memory.swap.max"):
                fs.write(directory / "memory.swap.max", "0")
        if limits.pids is not None:
            fs.write(directory / "pids.max", str(limits.pids))
        if limits.cpu_quota_us is not None:
            fs.write(directory / "cpu.max", f"{limits.cpu_quota_us} {CPU_PERIOD_US}")


def find_hierarchy(controllers: frozenset[Controller], fs: CgroupFS | None = None) -> Hierarchy:
    """The hierarchy that can give a trial's group ``controllers``: v2 first, else v1.

    Nothing is created; :meth:`Hierarchy.open` may still fail (a race, a full
    disk of groups).

    Raises:
        CgroupUnavailable: neither can; ``reasons`` says why for each.
    """
    fs = fs or CgroupFS()
    try:
        mounts = parse_mounts(
            fs.read(Path("/proc/self/mountinfo")), fs.read(Path("/proc/self/cgroup"))
        )
    except OSError as exc:
        raise CgroupUnavailable([f"cannot read /proc/self: {_why(exc)}"]) from None
    reasons: list[str] = []
    for mount in (m for m in mounts if m.version == "v2"):
        candidate = V2Hierarchy(own=mount.own, controllers=controllers, fs=fs)
        problem = candidate._missing()
        if problem is None:
            return candidate
        reasons.append(problem)
        break
    else:
        reasons.append("cgroup v2: the unified hierarchy is not mounted")
    v1 = _v1_hierarchy(mounts, controllers, fs)
    if isinstance(v1, V1Hierarchy):
        return v1
    raise CgroupUnavailable([*reasons, v1])


def _v1_hierarchy(
    mounts: Sequence[Mount], controllers: frozenset[Controller], fs: CgroupFS
) -> V1Hierarchy | str:
    """The v1 hierarchies of ``controllers``, or why they cannot be used."""
    owns: list[Path] = []
    for controller in sorted(controllers):
        mount = next((m for m in mounts if m.version == "v1" and controller in m.controllers), None)
        if mount is None:
            return f"cgroup v1: no {controller} hierarchy is mounted"
        if not fs.writable(mount.own):
            return f"cgroup v1: {mount.own} is not writable by this user"
        if mount.own not in owns:
            owns.append(mount.own)
    return V1Hierarchy(owns=tuple(owns), fs=fs)


def _why(exc: OSError) -> str:
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
            if pid in _pids(handle.read()):
                send(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)
