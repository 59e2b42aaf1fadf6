"""Where a run's control groups are made: cgroup v2, or the v1 hierarchies.

* **v2** (:class:`V2Hierarchy`): the unified hierarchy, when the engine's own
  cgroup has the controllers (a delegated subtree: the root, a container's
  cgroup, a ``systemd-run --scope -p Delegate=yes`` unit). The kernel allows
  controllers in a group's children only while the group holds no process, so
  when the engine's cgroup is not the root and the engine is alone in it, the
  engine moves itself into a leaf (``atlante-eval-engine-<pid>``) for the run
  and back afterwards; it never moves a process it does not own.
* **v1** (:class:`V1Hierarchy`): one group per needed controller's hierarchy,
  below the engine's own group in each.

Either way a run owns one *run group* (``atlante-eval-<pid>-<token>``) and each
trial a group below it (:class:`~.cgroups.TrialGroup`), its limits written before
any process joins it. :func:`find_hierarchy` picks v2 where it has every needed
controller, else v1, else raises :class:`~.cgroups.CgroupUnavailable` with what
each lacked; :func:`sweep_stale` removes what an engine killed outright left.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .cgroups import (
    CPU_PERIOD_US,
    EMPTY_WAIT_S,
    GROUP_PREFIX,
    CgroupFS,
    CgroupUnavailable,
    CgroupVersion,
    Controller,
    GroupLimits,
    Mount,
    TrialGroup,
    parse_mounts,
    pids_in,
    remove_dirs,
    why,
)

__all__ = ["Hierarchy", "V1Hierarchy", "V2Hierarchy", "find_hierarchy", "sweep_stale"]


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
            remove_dirs(self.fs, made, time.monotonic())
            raise CgroupUnavailable(
                [f"cgroup v1: cannot create {own / name}: {why(exc)}"]
            ) from None
        self._runs = tuple(made)

    def close(self) -> str | None:
        """Remove the run groups (their trial groups are gone already)."""
        runs, self._runs = self._runs, ()
        return remove_dirs(self.fs, runs, time.monotonic() + EMPTY_WAIT_S)

    def create(self, name: str, limits: GroupLimits) -> TrialGroup:
        """Create the trial's group in every hierarchy and write its limits."""
        dirs = tuple(run / name for run in self._runs)
        group = TrialGroup("v1", dirs, self.fs)
        try:
            for directory in dirs:
                self.fs.mkdir(directory)
                self._limit(directory, limits)
        except OSError:
            remove_dirs(self.fs, dirs, time.monotonic() + EMPTY_WAIT_S)
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
            raise CgroupUnavailable([f"cgroup v2: {self.own}: {why(exc)}"]) from None

    def _missing(self) -> str | None:
        """Why the engine's group cannot give its children the controllers, if it cannot."""
        try:
            available = set(self.fs.read(self.own / "cgroup.controllers").split())
        except OSError as exc:
            return f"cgroup v2: cannot read {self.own}/cgroup.controllers: {why(exc)}"
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
            members = pids_in(self.fs.read(self.own / "cgroup.procs"))
            others = [pid for pid in members if pid != os.getpid()]
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
            problem = remove_dirs(self.fs, [run], time.monotonic() + EMPTY_WAIT_S)
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
            problem = problem or f"cannot restore {self.own}: {why(exc)}"
        return problem

    def create(self, name: str, limits: GroupLimits) -> TrialGroup:
        """Create the trial's group below the run group and write its limits."""
        assert self._run is not None, "open() first"
        directory = self._run / name
        self.fs.mkdir(directory)
        try:
            self._limit(directory, limits)
        except OSError:
            remove_dirs(self.fs, [directory], time.monotonic() + EMPTY_WAIT_S)
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
        raise CgroupUnavailable([f"cannot read /proc/self: {why(exc)}"]) from None
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
