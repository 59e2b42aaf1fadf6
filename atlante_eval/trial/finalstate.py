"""Record a trial's final state: what ``regrade`` needs to rebuild its sandbox exactly.

A sandbox is rebuilt in layers (docs/regrade.md): the fixture and native outputs
(copied afresh, as for the trial), then ``prepared`` (what host preparation and
setup changed, recorded right after assembly, before the session), then
``changes`` (what the agent changed since the baseline, recorded after the
session and before the first check runs, so command checks that write files do
not leak into it), then the final tree's directories and the sandbox's ``.git``.

Everything a check can observe is recorded: file contents (text or binary),
deletions, permission bits, symbolic links (their targets, never followed),
empty directories, and the repository an agent may have committed to. Contents
go to the run's content store (:class:`~atlante_eval.report.blobstore.BlobStore`);
a trial's state refers to at most ``cap_bytes`` of content, and whatever is left
out (over the cap, unreadable, a FIFO or device, a name that is not UTF-8) is
listed, which makes the state incomplete: such a trial cannot be regraded and
says so.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._util.fstree import Unreadable, walk_tree
from .._util.paths import display_path
from ..choices import DEFAULT_STATE_CAP_BYTES
from ..project import Scenario
from ..report import FinalStateRef, TrialFiles
from ..report.blobstore import BlobStore
from ..report.final_state import (
    FINAL_STATE_FILE,
    FINAL_STATE_VERSION,
    FinalState,
    Omission,
    StateEntry,
    TaskBasis,
    prompt_digest,
)
from ..transcript.writer import MIN_SECRET_LENGTH
from .gitops import Changes
from .sandbox import Sandbox
from .treestate import TreeSnapshot, tree_digest

__all__ = [
    "DEFAULT_STATE_CAP_BYTES",
    "StateCapture",
    "StateSettings",
    "TrialState",
    "task_basis",
]

#: Omissions listed in a manifest (all are counted).
_LISTED_OMISSIONS = 100
_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_GIT = ".git"


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _open_parent(root_fd: int, path: str) -> tuple[int, str]:
    """Open the directory holding ``path`` below ``root_fd``, following no link.

    Returns an owned descriptor and the last name.

    Raises:
        OSError: a component is missing, a symlink (``ELOOP``) or not a directory.
    """
    parts = path.split("/")
    if not path or any(part in ("", ".", "..") for part in parts):
        raise OSError(errno.EINVAL, "not a relative path", path)
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            child = os.open(part, _NOFOLLOW_DIR, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


class _Parents:
    """Opens the directory of each path in turn, keeping the last one open."""

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd
        self.directory: str | None = None
        self.fd = -1

    def of(self, path: str) -> tuple[int, str]:
        """The descriptor of ``path``'s directory (owned here) and its last name."""
        directory, _, name = path.rpartition("/")
        if directory != self.directory:
            self.close()
            self.fd, _ = _open_parent(self.root_fd, path)
            self.directory = directory
        return self.fd, name

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = -1
        self.directory = None


@dataclass
class StateCapture:
    """Stores file contents for one trial's state within its cap, noting what it leaves out."""

    store: BlobStore
    cap_bytes: int = DEFAULT_STATE_CAP_BYTES
    bytes: int = 0
    """Content bytes referred to so far."""
    files: int = 0
    """File contents referred to so far."""
    stored_bytes: int = 0
    """Bytes this trial added to the store."""
    omitted: list[Omission] = field(default_factory=list)
    omitted_count: int = 0
    secrets: tuple[str, ...] = ()
    """Values never stored: a file whose name, link target or content holds one is left
    out (the trial then cannot be regraded), as every report field is redacted."""

    def omit(self, path: str, reason: str) -> None:
        """Record that ``path`` was not stored (a secret in its name shown redacted)."""
        self.omitted_count += 1
        if len(self.omitted) < _LISTED_OMISSIONS:
            shown = path
            for secret in self.secrets:
                shown = shown.replace(secret, "[redacted]")
            self.omitted.append(Omission(path=display_path(shown), reason=reason))

    def _secret_in(self, text: str) -> bool:
        return any(secret in text for secret in self.secrets)

    def _secret_in_file(self, fd: int) -> bool:
        """Whether the open file's content holds a secret value (read in overlapping chunks)."""
        needles = [secret.encode() for secret in self.secrets]
        overlap = max(len(n) for n in needles) - 1
        os.lseek(fd, 0, os.SEEK_SET)
        tail = b""
        while chunk := os.read(fd, 1 << 20):
            window = tail + chunk
            if any(needle in window for needle in needles):
                return True
            tail = window[-overlap:] if overlap else b""
        return False

    def layer(self, root: Path, paths: Iterable[str]) -> list[StateEntry]:
        """What stands at each of ``paths`` below ``root`` now (``deleted`` when nothing).

        Paths are visited sorted, so the directory of consecutive paths is opened once.
        """
        root_fd = os.open(root, _NOFOLLOW_DIR)
        parents = _Parents(root_fd)
        try:
            entries = (self._entry(parents, path) for path in sorted(paths))
            return [entry for entry in entries if entry is not None]
        finally:
            parents.close()
            os.close(root_fd)

    def _entry(self, parents: _Parents, path: str) -> StateEntry | None:
        if not _utf8(path):
            self.omit(path, "its name is not UTF-8")
            return None
        if self._secret_in(path):
            self.omit(path, "its name holds a secret value")
            return None
        try:
            parent, name = parents.of(path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return StateEntry(path=path, kind="deleted")  # no such path in the tree
            self.omit(path, f"its directory cannot be opened: {exc.strerror}")
            return None
        return self._at(parent, name, path)

    def _at(self, parent: int, name: str, path: str) -> StateEntry | None:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return StateEntry(path=path, kind="deleted")
        except OSError as exc:
            self.omit(path, f"cannot be inspected: {exc.strerror}")
            return None
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(name, dir_fd=parent)
            if not _utf8(target):
                self.omit(path, "its link target is not UTF-8")
                return None
            if self._secret_in(target):
                self.omit(path, "its link target holds a secret value")
                return None
            return StateEntry(path=path, kind="symlink", target=target)
        if stat.S_ISDIR(info.st_mode):
            return StateEntry(path=path, kind="deleted")  # the file is gone; dirs are listed
        if not stat.S_ISREG(info.st_mode):
            self.omit(path, "a FIFO, socket or device (not stored)")
            return None
        return self._file(parent, name, path, info)

    def _file(self, parent: int, name: str, path: str, info: os.stat_result) -> StateEntry | None:
        if self.bytes + info.st_size > self.cap_bytes:
            self.omit(path, f"over the final-state cap of {self.cap_bytes} bytes")
            return None
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            self.omit(path, f"cannot be read: {exc.strerror}")
            return None
        try:
            now = os.fstat(fd)
            if not stat.S_ISREG(now.st_mode):
                self.omit(path, "replaced while it was stored")
                return None
            if self.secrets and self._secret_in_file(fd):
                self.omit(path, "holds a secret value")
                return None
            digest, added = self.store.put_file(fd)
        except OSError as exc:
            self.omit(path, f"cannot be stored: {exc.strerror or exc}")
            return None
        finally:
            os.close(fd)
        self.bytes += now.st_size
        self.files += 1
        self.stored_bytes += added
        return StateEntry(
            path=path, kind="file", mode=stat.S_IMODE(now.st_mode), blob=digest, size=now.st_size
        )

    def _tree(self, root: Path, below: str) -> tuple[list[StateEntry], list[str]]:
        """The directories (with modes) and other entries below ``root/below``.

        At the top level (``below`` empty) the ``.git`` directory is left out. The
        walk holds a bounded number of descriptors and no recursion, whatever the depth.
        """
        dirs_found: list[StateEntry] = []
        others: list[str] = []
        prefix = f"{below}/" if below else ""
        skip = frozenset() if below else frozenset({_GIT})
        for item in walk_tree(root / below if below else root, skip_top=skip, dirs=True):
            path = prefix + item.path
            if isinstance(item, Unreadable):
                self.omit(path, f"directory cannot be listed: {item.reason}")
            elif not stat.S_ISDIR(item.info.st_mode):
                others.append(path)
            elif not _utf8(path):
                self.omit(path, "its name is not UTF-8")
            elif self._secret_in(path):
                self.omit(path, "its name holds a secret value")
            else:
                mode = stat.S_IMODE(item.info.st_mode)
                dirs_found.append(StateEntry(path=path, kind="dir", mode=mode))
        return sorted(dirs_found, key=lambda entry: entry.path), sorted(others)

    def modes(
        self, root: Path, baseline: TreeSnapshot, changed: Collection[str]
    ) -> list[StateEntry]:
        """Baseline files not in ``changed`` whose permission bits differ now (a ``chmod``)."""
        found = []
        for path in baseline.entries:
            before = baseline.mode_of(path)
            if before is None or path in changed or not _utf8(path):
                continue
            try:
                info = os.lstat(root / path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) != before:
                found.append(StateEntry(path=path, kind="file", mode=stat.S_IMODE(info.st_mode)))
        return sorted(found, key=lambda entry: entry.path)

    def directories(self, root: Path) -> list[StateEntry]:
        """Every directory of the tree at ``root`` with its mode (the top-level ``.git`` aside)."""
        return self._tree(root, "")[0]

    def git(self, root: Path) -> list[StateEntry]:
        """The sandbox's top-level ``.git``, whole: its directories, files and links."""
        try:
            info = os.lstat(root / _GIT)
        except FileNotFoundError:
            return []
        if not stat.S_ISDIR(info.st_mode):
            return [e for e in self.layer(root, [_GIT]) if e.kind != "deleted"]
        top = StateEntry(path=_GIT, kind="dir", mode=stat.S_IMODE(info.st_mode))
        dirs, others = self._tree(root, _GIT)
        return [top, *dirs, *self.layer(root, others)]


@dataclass(frozen=True, slots=True)
class StateSettings:
    """How a run records its trials' final states (``--no-final-state``: none at all)."""

    cap_bytes: int = DEFAULT_STATE_CAP_BYTES
    """The most content bytes one trial's state may refer to."""
    fixture_digests: Mapping[str, str] = field(default_factory=dict)
    """Each scenario's fixture digest, by name (recorded in the task basis)."""
    native_digest: str | None = None
    """The native-output manifest digest."""


def task_basis(scenario: Scenario, *, fixture: str | None, native: str | None) -> TaskBasis:
    """What a trial of ``scenario`` is asked, for ``regrade``'s comparison."""
    task = scenario.document.task
    return TaskBasis(
        fixture=fixture,
        native=native,
        prompt=prompt_digest(task.prompt),
        agent=task.agent,
        setup=list(task.setup) if task.setup else None,
    )


@dataclass(frozen=True, slots=True)
class _Final:
    """What :meth:`TrialState.record_final` recorded."""

    baseline: str
    changes: list[StateEntry]
    modes: list[StateEntry]
    dirs: list[StateEntry]
    git: list[StateEntry]


class TrialState:
    """One trial's final state, recorded in two steps and published beside its transcript."""

    def __init__(
        self,
        store: BlobStore,
        settings: StateSettings,
        scenario: Scenario,
        index: int,
        *,
        ignored: Iterable[str],
        secrets: Iterable[str] = (),
    ) -> None:
        self.scenario = scenario
        self.index = index
        self.settings = settings
        self.ignored = list(ignored)
        kept = tuple(s for s in secrets if len(s.strip()) >= MIN_SECRET_LENGTH)  # as redacted
        self.capture = StateCapture(store, cap_bytes=settings.cap_bytes, secrets=kept)
        self.prepared: list[StateEntry] = []
        self.final: _Final | None = None

    def record_prepared(self, sandbox: Sandbox) -> None:
        """Store what host preparation and setup changed (call before the session).

        Never raises: a state that cannot be recorded is incomplete, the trial goes on.
        """
        paths = sandbox.prepared
        if paths is None:
            self.capture.omit(".", "the assembled sandbox was not recorded")
            return
        try:
            self.prepared = self.capture.layer(sandbox.root, paths)
        except Exception as exc:  # noqa: BLE001 - the trial must not fail for its record
            self.capture.omit(".", f"the prepared sandbox could not be recorded: {exc}")

    def record_final(self, sandbox: Sandbox, changes: Changes | None) -> None:
        """Store what the agent left (call after the session, before the first check).

        Never raises: a state that cannot be recorded is incomplete, the trial goes on.
        """
        if changes is None:
            self.capture.omit(".", "the sandbox's changes could not be collected")
            return
        tree = sandbox.baseline.tree
        try:
            self.final = _Final(
                baseline=tree_digest(tree),
                changes=self.capture.layer(sandbox.root, changes.paths),
                modes=self.capture.modes(sandbox.root, tree, frozenset(changes.paths)),
                dirs=self.capture.directories(sandbox.root),
                git=self.capture.git(sandbox.root),
            )
        except Exception as exc:  # noqa: BLE001 - the trial must not fail for its record
            self.capture.omit(".", f"the final tree could not be recorded: {exc}")

    def manifest(self) -> FinalState | None:
        """The manifest (``None`` when the final tree was never recorded)."""
        if self.final is None:
            return None
        final = self.final
        capture = self.capture
        return FinalState(
            version=FINAL_STATE_VERSION,
            scenario=self.scenario.name,
            trial=self.index,
            task=task_basis(
                self.scenario,
                fixture=self.settings.fixture_digests.get(self.scenario.name),
                native=self.settings.native_digest,
            ),
            ignored=self.ignored,
            baseline_digest=final.baseline,
            prepared=self.prepared,
            changes=final.changes,
            modes=final.modes,
            dirs=final.dirs,
            git=final.git,
            complete=capture.omitted_count == 0,
            omitted=capture.omitted,
            omitted_count=capture.omitted_count,
            cap_bytes=capture.cap_bytes,
            bytes=capture.bytes,
        )

    def publish(self, files: TrialFiles) -> FinalStateRef | None:
        """Write ``final-state.json`` into the trial's folder; return the report's reference.

        ``None`` when there is nothing to publish (the final tree was never recorded).

        Raises:
            OSError: the manifest cannot be written.
        """
        manifest = self.manifest()
        if manifest is None:
            return None
        data = manifest.to_bytes()
        with files.create(FINAL_STATE_FILE) as handle:
            handle.write(data)
        capture = self.capture
        first = capture.omitted[0] if capture.omitted else None
        return FinalStateRef(
            path=files.path_of(FINAL_STATE_FILE),
            digest=hashlib.sha256(data).hexdigest(),
            complete=manifest.complete,
            files=capture.files,
            bytes=capture.bytes,
            stored_bytes=capture.stored_bytes,
            omitted=capture.omitted_count or None,
            reason=f"{first.path}: {first.reason}" if first is not None else None,
        )
