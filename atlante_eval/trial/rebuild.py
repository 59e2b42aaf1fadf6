"""Rebuild a trial's final sandbox from its stored final state, for ``regrade``.

:func:`rebuilt_sandbox` assembles a fresh sandbox exactly as the trial's was
(docs/regrade.md): a fresh copy of the fixture and the native outputs, the
``prepared`` layer (what host preparation and setup changed; setup is not run
again), the ``file-unchanged`` snapshot of the *current* checks, the git
baseline, which must hash to the trial's (else the stored work would answer
another task), then the agent's changes, its ``chmod``s, the final tree's
directories and its ``.git``. No host is involved and no session is started.

Stored paths are untrusted: each is relative, without ``..``, and written
through directory descriptors opened with ``O_NOFOLLOW``, so a manifest cannot
make the rebuild write outside the new sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from .._util import fstree
from .._util.fstree import WalkEntry, walk_tree
from ..project import NativeOutputs, Scenario
from ..report.blobstore import BlobError, BlobStore
from ..report.final_state import FinalState, StateEntry
from .gitops import GitError, make_baseline
from .sandbox import Sandbox, SandboxError, TrialDirs, _assemble_files, _fresh_dir, _snapshot
from .treestate import tree_digest

__all__ = ["RebuildError", "apply_entries", "rebuilt_sandbox"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_GIT = ".git"
#: Most directory descriptors a rebuild holds open at once.
_OPEN_DIRS = 32


class RebuildError(Exception):
    """Raised by :func:`rebuilt_sandbox` when a trial's sandbox cannot be rebuilt.

    ``regrade`` records the message as why the trial is ``unavailable``.
    """


def _parts(path: str) -> list[str]:
    parts = path.split("/")
    if not path or "\0" in path or any(part in ("", ".", "..") for part in parts):
        raise RebuildError(f"the final state names an unsafe path: {path[:200]!r}")
    return parts


def _remove_at(parent: int, name: str, where: Path) -> None:
    """Remove whatever stands at ``name`` in ``parent`` (``where``, for a directory tree)."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    left = fstree.remove_tree(where)
    if left is not None:
        raise RebuildError(f"cannot clear {left.path}: {left.reason}")


class _Chain:
    """The directories along the path last entered below the root, opened without links.

    Consecutive entries (sorted by path, or deepest first) share most of their
    directories, so entering the next one opens only what differs, and a tree
    thousands of levels deep costs no more than a flat one. At most
    :data:`_OPEN_DIRS` descriptors stay open; a shallower one is reopened when needed.
    """

    def __init__(self, root: Path, root_fd: int) -> None:
        self.root = root
        self.root_fd = root_fd
        self.names: list[str] = []
        self.fds: list[int | None] = []

    def _truncate(self, length: int) -> None:
        for fd in self.fds[length:]:
            if fd is not None:
                os.close(fd)
        del self.names[length:], self.fds[length:]

    def _reopen(self) -> int:
        """The descriptor of the chain's last directory, reopening closed ancestors."""
        deepest = len(self.fds) - 1
        while deepest >= 0 and self.fds[deepest] is None:
            deepest -= 1
        if deepest == len(self.fds) - 1:
            last = self.fds[deepest] if deepest >= 0 else self.root_fd
            assert last is not None
            return last
        fd = self.root_fd
        for index, name in enumerate(self.names):  # closed ones are shallow: start over
            current = self.fds[index]
            fd = current if current is not None else os.open(name, _DIR_FLAGS, dir_fd=fd)
            self.fds[index] = fd
            self._bound()
        return fd

    def _bound(self) -> None:
        open_ = [i for i, fd in enumerate(self.fds) if fd is not None]
        for index in open_[: max(0, len(open_) - _OPEN_DIRS)]:
            fd = self.fds[index]
            assert fd is not None
            os.close(fd)
            self.fds[index] = None

    def enter(self, parts: Sequence[str], *, create: bool) -> int:
        """The directory ``parts`` (a borrowed descriptor, valid until the next call).

        With ``create``, missing levels are made and a non-directory in the way is
        removed (the final state puts a directory there); a link is never followed.

        Raises:
            OSError: a level is missing or not a directory (without ``create``).
        """
        common = 0
        while common < min(len(parts), len(self.names)) and self.names[common] == parts[common]:
            common += 1
        self._truncate(common)
        fd = self._reopen()
        for index in range(common, len(parts)):
            part = parts[index]
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if not create or exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    raise
                _remove_at(fd, part, self.root.joinpath(*parts[: index + 1]))
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            self.names.append(part)
            self.fds.append(child)
            fd = child
            self._bound()
        return fd

    def close(self) -> None:
        self._truncate(0)


def _place(chain: _Chain, entry: StateEntry, store: BlobStore | None) -> None:
    """Make ``entry.path`` what the entry says (deleted, a file, a link, a directory)."""
    parts = _parts(entry.path)
    where = chain.root.joinpath(*parts)
    try:
        parent = chain.enter(parts[:-1], create=entry.kind != "deleted")
    except (FileNotFoundError, NotADirectoryError):
        return  # deleting below a directory that is not there: nothing to do
    name = parts[-1]
    if entry.kind == "dir":
        try:
            os.close(os.open(name, _DIR_FLAGS, dir_fd=parent))
        except OSError:
            _remove_at(parent, name, where)
            os.mkdir(name, 0o755, dir_fd=parent)
        return
    _remove_at(parent, name, where)
    if entry.kind == "symlink":
        os.symlink(entry.target or "", name, dir_fd=parent)
    elif entry.kind == "file":
        _write_file(parent, name, entry, store)


def _write_file(parent: int, name: str, entry: StateEntry, store: BlobStore | None) -> None:
    if store is None or entry.blob is None or entry.size is None:
        raise RebuildError(f"the final state has no content for {entry.path}")
    data = store.read(entry.blob, size=entry.size)
    fd = os.open(name, _NEW_FILE, 0o600, dir_fd=parent)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, entry.mode if entry.mode is not None else 0o644)
    finally:
        os.close(fd)


def _chmod(chain: _Chain, entry: StateEntry) -> None:
    """Set an entry's permission bits (never through a link)."""
    if entry.mode is None:
        return
    parts = _parts(entry.path)
    parent = chain.enter(parts[:-1], create=False)
    info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    if not stat.S_ISLNK(info.st_mode):
        os.chmod(parts[-1], entry.mode, dir_fd=parent)


@contextlib.contextmanager
def _chain(root: Path) -> Iterator[_Chain]:
    root_fd = os.open(root, _DIR_FLAGS)
    chain = _Chain(root, root_fd)
    try:
        yield chain
    finally:
        chain.close()
        os.close(root_fd)


def apply_entries(root: Path, entries: Sequence[StateEntry], store: BlobStore | None) -> None:
    """Apply a layer below ``root``: deletions first, then directories, files and links.

    Raises:
        RebuildError: a path is unsafe or a content is missing or damaged.
        OSError: the tree cannot be written.
    """
    order = {"deleted": 0, "dir": 1, "file": 2, "symlink": 2}
    try:
        with _chain(root) as chain:
            for entry in sorted(entries, key=lambda e: (order[e.kind], e.path)):
                _place(chain, entry, store)
    except BlobError as exc:
        raise RebuildError(f"stored content is missing or damaged: {exc}") from exc


def _existing_dirs(root: Path) -> set[str]:
    """Every directory below ``root`` (the top-level ``.git`` aside), whatever the depth."""
    return {
        item.path
        for item in walk_tree(root, skip_top=frozenset({_GIT}), dirs=True)
        if isinstance(item, WalkEntry) and stat.S_ISDIR(item.info.st_mode)
    }


def _apply_dirs(root: Path, dirs: Sequence[StateEntry]) -> None:
    """Make the tree's directories exactly ``dirs``, with their modes."""
    wanted = {entry.path for entry in dirs}
    apply_entries(root, dirs, None)
    extra = sorted(_existing_dirs(root) - wanted, key=lambda p: (-p.count("/"), p))
    with _chain(root) as chain:
        for path in extra:
            parts = _parts(path)
            parent = chain.enter(parts[:-1], create=False)
            try:
                os.rmdir(parts[-1], dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ENOTEMPTY:
                    raise RebuildError(
                        f"{path} holds files the trial's final state does not"
                    ) from exc
                raise


def _apply_modes(root: Path, entries: Sequence[StateEntry]) -> None:
    """Set modes deepest first, so a directory made read-only does not block its children."""
    with _chain(root) as chain:
        for entry in sorted(entries, key=lambda e: (-e.path.count("/"), e.path)):
            _chmod(chain, entry)


def _apply_final(root: Path, state: FinalState, store: BlobStore) -> None:
    """Apply the agent's changes, its ``chmod``s, the final directories and ``.git``."""
    apply_entries(root, state.changes, store)
    _apply_dirs(root, state.dirs)
    with _chain(root) as chain:
        _remove_at(chain.root_fd, _GIT, root / _GIT)
    apply_entries(root, state.git, store)
    _apply_modes(root, [*state.modes, *(e for e in state.git if e.kind == "dir"), *state.dirs])


@asynccontextmanager
async def rebuilt_sandbox(
    run_root: Path,
    scenario: Scenario,
    state: FinalState,
    *,
    native: NativeOutputs,
    store: BlobStore,
    owner: TrialDirs,
    skeleton: Path | None = None,
) -> AsyncIterator[Sandbox]:
    """Rebuild the final sandbox of the trial ``state`` records; ``owner`` removes it later.

    Raises:
        RebuildError: the fixture or native outputs cannot be assembled, the
            rebuilt baseline differs from the trial's, or a stored content is
            missing or damaged.
    """
    trial_dir = _fresh_dir(run_root, f"{scenario.name}-regrade-{state.trial}")
    owner.paths.append(trial_dir)
    root = trial_dir / "project"
    state_dir = trial_dir / "state"
    git_dir = trial_dir / "baseline.git"
    try:
        await anyio.to_thread.run_sync(_assemble_files, scenario, native, root, state_dir)
        await anyio.to_thread.run_sync(apply_entries, root, state.prepared, store)
        snapshot = await anyio.to_thread.run_sync(_snapshot, root, scenario)
        baseline = await make_baseline(root, git_dir, skeleton=skeleton)
        if tree_digest(baseline.tree) != state.baseline_digest:
            raise RebuildError(
                "the rebuilt baseline differs from the trial's: the fixture, the native "
                "outputs or what setup produced are not what the trial started from"
            )
        await anyio.to_thread.run_sync(_apply_final, root, state, store)
    except (SandboxError, GitError) as exc:
        raise RebuildError(f"cannot rebuild the sandbox: {exc}") from exc
    except OSError as exc:
        raise RebuildError(f"cannot rebuild the sandbox: {exc.strerror or exc}") from exc
    yield Sandbox(
        trial_dir=trial_dir,
        root=root,
        state_dir=state_dir,
        git_dir=git_dir,
        baseline=baseline,
        snapshot=snapshot,
    )
