"""Notice writes into the user's project during a run: the inputs every trial copies.

Without OS isolation an agent can reach the project (through ``/proc``, say) and
edit a fixture so that later trials pass without doing anything. The run records
the digest of every scenario document, fixture file and native output when it
starts (the same content its fingerprints cover), and checks them again before
each trial's assembly and at the end. A trial whose inputs changed is not run
(``infra-error``), and the report lists what changed.

Checking is cheap: each file's ``lstat`` signature (inode, size, mode, mtime and
ctime in nanoseconds) is compared first, and a file whose signature moved is
hashed again; the digest decides. ``ctime`` cannot be set back by an
unprivileged process, so a rewrite with a restored mtime is still hashed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from .native import NativeOutputs
from .scenarios import Scenario

__all__ = ["ProjectWatch", "Watched", "modified_cause", "project_label", "watch_run_inputs"]

_Signature = tuple[int, int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class Watched:
    """One input of the run: a file, or a directory tree of files."""

    path: Path
    """Absolute path."""
    label: str
    """How reports name it (project-relative where possible)."""
    scenarios: frozenset[str]
    """The scenarios whose trials use it."""
    tree: bool = False
    """A directory whose every regular file (and whose listing) is watched."""


@dataclass(slots=True)
class _State:
    signature: _Signature | None
    digest: str | None
    executable: bool


def _signature(info: os.stat_result) -> _Signature:
    return (
        info.st_ino,
        info.st_size,
        info.st_mode,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_dev,
    )


def _hash(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return digest.hexdigest()


def _tree_files(root: Path) -> Iterable[tuple[str, Path, os.stat_result]]:
    """Every non-symlink entry below ``root``: (relative path, path, lstat), iteratively."""
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            with os.scandir(directory) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            relative = f"{prefix}{entry.name}"
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append((Path(entry.path), f"{relative}/"))
            else:
                yield relative, Path(entry.path), info


@dataclass
class ProjectWatch:
    """The digests of a run's project inputs, and what changed since they were taken."""

    watched: Sequence[Watched]
    _states: dict[str, _State] = field(default_factory=dict)
    _owners: dict[str, frozenset[str]] = field(default_factory=dict)
    _changed: dict[str, frozenset[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _refreshing: anyio.Lock = field(default_factory=anyio.Lock)
    _started: int = 0
    _done_through: int = 0

    def _current(self) -> dict[str, tuple[Path, os.stat_result | None, frozenset[str]]]:
        found: dict[str, tuple[Path, os.stat_result | None, frozenset[str]]] = {}
        for item in self.watched:
            if item.tree:
                for relative, path, entry in _tree_files(item.path):
                    found[f"{item.label}/{relative}"] = (path, entry, item.scenarios)
                continue
            info: os.stat_result | None
            try:
                info = os.lstat(item.path)
            except OSError:
                info = None
            found[item.label] = (item.path, info, item.scenarios)
        return found

    def snapshot(self) -> None:
        """Take the digests the run starts with (call once, off the event loop)."""
        with self._lock:
            for label, (path, info, owners) in self._current().items():
                regular = info is not None and stat.S_ISREG(info.st_mode)
                self._states[label] = _State(
                    signature=_signature(info) if info is not None else None,
                    digest=_hash(path) if regular else None,
                    executable=info is not None and bool(info.st_mode & stat.S_IXUSR),
                )
                self._owners[label] = owners

    def tree_digest(self, path: Path) -> str | None:
        """The :func:`fingerprint.fixture_digest` of the watched tree at ``path``, if any."""
        label = next((w.label for w in self.watched if w.tree and w.path == path), None)
        if label is None or not self._states:
            return None
        digest = hashlib.sha256()
        prefix = f"{label}/"
        for name in sorted(n for n in self._states if n.startswith(prefix)):
            state = self._states[name]
            if state.digest is None:
                continue
            relative = name[len(prefix) :]
            flag = "x" if state.executable else "-"
            digest.update(f"{relative}\0{flag}\0{state.digest}\n".encode())
        return digest.hexdigest()

    def check(self) -> dict[str, frozenset[str]]:
        """Compare the inputs with the snapshot; return every changed label and its scenarios.

        Changes accumulate: a label reported once stays reported.
        """
        with self._lock:
            current = self._current()
            for label in self._states.keys() - current.keys():
                self._changed.setdefault(label, self._owners[label])
            for label, (path, info, owners) in current.items():
                if label in self._changed:
                    continue
                state = self._states.get(label)
                if state is None:
                    self._changed[label] = owners  # a file added to a fixture
                    continue
                signature = _signature(info) if info is not None else None
                if signature == state.signature:
                    continue
                regular = info is not None and stat.S_ISREG(info.st_mode)
                digest = _hash(path) if regular else None
                if digest is not None and digest == state.digest:
                    state.signature = signature  # touched, same content
                    continue
                self._changed[label] = owners
            return dict(self._changed)

    async def refresh(self) -> None:
        """Run :meth:`check` in a worker thread, sharing a check that starts after the call.

        Trials that ask at once wait for one walk of the inputs instead of one each.
        """
        wanted = self._started + 1
        async with self._refreshing:
            if self._done_through >= wanted:
                return
            self._started += 1
            number = self._started
            await anyio.to_thread.run_sync(self.check)
            self._done_through = number

    def changed(self) -> list[str]:
        """Every changed label found so far, sorted."""
        with self._lock:
            return sorted(self._changed)

    def affecting(self, scenario: str) -> list[str]:
        """The changed labels found so far that the scenario's trials use."""
        with self._lock:
            return sorted(label for label, owners in self._changed.items() if scenario in owners)


def project_label(path: Path, project_root: Path) -> str:
    """``path`` relative to the project root when inside it, else absolute (always UTF-8)."""
    try:
        shown = path.absolute().relative_to(project_root.absolute()).as_posix()
    except ValueError:
        shown = str(path)
    return os.fsencode(shown).decode("utf-8", "replace")


def watch_run_inputs(
    project_root: Path, scenarios: Sequence[Scenario], native: NativeOutputs | None
) -> ProjectWatch:
    """Watch the documents and fixtures of ``scenarios`` and the native outputs.

    A document concerns its scenario, a fixture every scenario that uses it, and
    the native outputs (and their manifest) every scenario.
    """
    everyone = frozenset(s.name for s in scenarios)
    items = [
        Watched(s.path, project_label(s.path, project_root), frozenset({s.name})) for s in scenarios
    ]
    fixtures: dict[Path, set[str]] = {}
    for scenario in scenarios:
        fixtures.setdefault(scenario.fixture_path, set()).add(scenario.name)
    items += [
        Watched(path, project_label(path, project_root), frozenset(names), tree=True)
        for path, names in fixtures.items()
    ]
    if native is not None:
        for relative in (native.manifest_path, *sorted(native.paths)):
            path = project_root / relative
            items.append(Watched(path, project_label(path, project_root), everyone))
    return ProjectWatch(items)


def modified_cause(labels: Sequence[str]) -> str:
    """The error of a trial not run because its inputs in the project changed."""
    shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    return (
        f"the project was modified during the run ({shown}): this trial's inputs are no "
        "longer the ones the run started with, so it was not run"
    )
