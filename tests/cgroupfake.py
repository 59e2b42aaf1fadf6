"""A simulated cgroup v2 kernel behind the engine's one cgroup seam (:class:`CgroupFS`).

This machine's unified hierarchy has none of the ``memory``, ``pids`` and
``cpu`` controllers (they are bound to v1), so the v2 code path that writes
limits, reads events and moves the engine into a leaf is exercised here against
the kernel's rules as ``Documentation/admin-guide/cgroup-v2.rst`` states them:

* a group's ``cgroup.controllers`` is its parent's ``cgroup.subtree_control``
  (the root's is every controller);
* a controller can be enabled in ``cgroup.subtree_control`` only if the group
  has it, and (the *no internal process* rule) only while the group holds no
  process, unless it is the root; it can be disabled only while no child has
  it enabled in turn;
* a process cannot join a non-root group that has controllers enabled for its
  children (``EBUSY``);
* a controller's interface files (``memory.max``, ``pids.events``...) exist
  only in groups that have the controller; the root has no ``cgroup.events``;
* ``rmdir`` fails with ``EBUSY`` while the group holds a process or a child;
* ``cgroup.kill`` kills every process of the group and its descendants.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from atlante_eval.isolation.cgroups import CgroupFS

CONTROLLER_FILES = {
    "memory": ("memory.max", "memory.swap.max", "memory.events"),
    "pids": ("pids.max", "pids.events"),
    "cpu": ("cpu.max", "cpu.stat"),
}


@dataclass
class FakeGroup:
    """One simulated group."""

    subtree: set[str] = field(default_factory=set)
    procs: set[int] = field(default_factory=set)
    values: dict[str, str] = field(default_factory=dict)
    """What was written to (or is reported by) its interface files."""


class FakeV2Kernel(CgroupFS):
    """A cgroup v2 hierarchy mounted at ``root`` in memory; the engine is ``own`` below it."""

    def __init__(
        self,
        root: Path,
        *,
        controllers: tuple[str, ...] = ("cpu", "memory", "pids"),
        own: str = "/",
        others: tuple[int, ...] = (),
        writable: bool = True,
    ) -> None:
        self.root = root
        self.controllers = set(controllers)
        self.groups: dict[Path, FakeGroup] = {root: FakeGroup()}
        self.killed: list[int] = []
        self.allow_write = writable
        engine = self._path(own)
        for parent in reversed([engine, *engine.parents]):
            if parent.is_relative_to(root) and parent not in self.groups:
                self.groups[parent] = FakeGroup()
                self.groups[parent.parent].subtree |= self.controllers
        self.groups[engine].procs |= {os.getpid(), *others}
        self.own = engine

    def _path(self, cgroup_path: str) -> Path:
        return self.root / cgroup_path.lstrip("/") if cgroup_path != "/" else self.root

    # -- the kernel's view -------------------------------------------------------------
    def available(self, group: Path) -> set[str]:
        """A group's ``cgroup.controllers``."""
        return (
            set(self.controllers) if group == self.root else set(self.groups[group.parent].subtree)
        )

    def group_of(self, pid: int) -> Path | None:
        """The group ``pid`` is in."""
        return next((path for path, g in self.groups.items() if pid in g.procs), None)

    def _children(self, group: Path) -> list[Path]:
        return [path for path in self.groups if path.parent == group and path != group]

    def _populated(self, group: Path) -> bool:
        return bool(self.groups[group].procs) or any(
            self._populated(c) for c in self._children(group)
        )

    # -- CgroupFS ----------------------------------------------------------------------
    def read(self, path: Path) -> str:
        if path == Path("/proc/self/mountinfo"):
            return f"40 31 0:38 / {self.root} rw,relatime - cgroup2 cgroup2 rw\n"
        if path == Path("/proc/self/cgroup"):
            relative = self.own.relative_to(self.root)
            return f"0::/{relative if str(relative) != '.' else ''}\n"
        group, name = self._split(path)
        state = self.groups[group]
        if name == "cgroup.controllers":
            return " ".join(sorted(self.available(group))) + "\n"
        if name == "cgroup.subtree_control":
            return " ".join(sorted(state.subtree)) + "\n"
        if name == "cgroup.procs":
            return "".join(f"{pid}\n" for pid in sorted(state.procs))
        if name == "cgroup.events":
            return f"populated {int(self._populated(group))}\nfrozen 0\n"
        return state.values.get(name, "")

    def write(self, path: Path, text: str) -> None:
        group, name = self._split(path)
        state = self.groups[group]
        if name == "cgroup.subtree_control":
            self._subtree(group, text.split())
        elif name == "cgroup.procs":
            if group != self.root and state.subtree:
                raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
            pid = int(text)
            old = self.group_of(pid)
            if old is not None:
                self.groups[old].procs.discard(pid)
            state.procs.add(pid)
        elif name == "cgroup.kill":
            for member in [group, *[p for p in self.groups if p.is_relative_to(group)]]:
                self.killed.extend(self.groups[member].procs)
                self.groups[member].procs.clear()
        else:
            state.values[name] = text

    def _subtree(self, group: Path, changes: list[str]) -> None:
        state = self.groups[group]
        for change in changes:
            name = change[1:]
            if change.startswith("+"):
                if name not in self.available(group):
                    raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), name)
                if group != self.root and state.procs:
                    raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), name)
                state.subtree.add(name)
            else:
                if any(name in self.groups[c].subtree for c in self._children(group)):
                    raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), name)
                state.subtree.discard(name)

    def exists(self, path: Path) -> bool:
        if path in self.groups:
            return True
        if path.parent not in self.groups:
            return False
        group, name = path.parent, path.name
        if name in ("cgroup.events", "cgroup.kill"):
            return group != self.root
        if name.startswith("cgroup."):
            return True
        owner = name.split(".", 1)[0]
        return owner in self.available(group) and name in CONTROLLER_FILES.get(owner, ())

    def writable(self, path: Path) -> bool:
        return self.allow_write and path in self.groups

    def listdir(self, path: Path) -> list[str]:
        if path not in self.groups:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        return [child.name for child in self._children(path)]

    def mkdir(self, path: Path) -> None:
        if path in self.groups:
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        if path.parent not in self.groups or not self.allow_write:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        self.groups[path] = FakeGroup()

    def rmdir(self, path: Path) -> None:
        if path not in self.groups:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        if self.groups[path].procs or self._children(path):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        del self.groups[path]

    def kill(self, pid: int, group: Path) -> None:
        if pid in self.groups[group].procs:
            self.groups[group].procs.discard(pid)
            self.killed.append(pid)

    def _split(self, path: Path) -> tuple[Path, str]:
        group = path.parent
        if group not in self.groups or not self.exists(path):
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        return group, path.name
