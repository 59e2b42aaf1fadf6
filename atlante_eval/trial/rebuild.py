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

import errno
import os
import stat
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from .._util import fstree
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


def _enter(root: Path, root_fd: int, parts: Sequence[str], *, create: bool) -> int:
    """Open the directory ``parts`` below ``root_fd`` (owned), making missing levels.

    A non-directory in the way is removed when ``create`` (the final state puts a
    directory there); a symbolic link is never followed.
    """
    fd = os.dup(root_fd)
    try:
        for index, part in enumerate(parts):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if not create or exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    raise
                _remove_at(fd, part, root.joinpath(*parts[: index + 1]))
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _place(root: Path, root_fd: int, entry: StateEntry, store: BlobStore | None) -> None:
    """Make ``entry.path`` what the entry says (deleted, a file, a link, a directory)."""
    parts = _parts(entry.path)
    where = root.joinpath(*parts)
    try:
        parent = _enter(root, root_fd, parts[:-1], create=entry.kind != "deleted")
    except FileNotFoundError:
        return  # deleting below a directory that is not there: nothing to do
    except NotADirectoryError:
        return
    name = parts[-1]
    try:
        if entry.kind == "dir":
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
                os.close(fd)
            except OSError:
                _remove_at(parent, name, where)
                os.mkdir(name, 0o755, dir_fd=parent)
            return
        _remove_at(parent, name, where)
        if entry.kind == "symlink":
            os.symlink(entry.target or "", name, dir_fd=parent)
        elif entry.kind == "file":
            _write_file(parent, name, entry, store)
    finally:
        os.close(parent)


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


def _chmod(root: Path, root_fd: int, entry: StateEntry) -> None:
    """Set an entry's permission bits (never through a link)."""
    if entry.mode is None:
        return
    parts = _parts(entry.path)
    parent = _enter(root, root_fd, parts[:-1], create=False)
    try:
        info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISLNK(info.st_mode):
            os.chmod(parts[-1], entry.mode, dir_fd=parent)
    finally:
        os.close(parent)


def apply_entries(root: Path, entries: Sequence[StateEntry], store: BlobStore | None) -> None:
    """Apply a layer below ``root``: deletions first, then directories, files and links.

    Raises:
        RebuildError: a path is unsafe or a content is missing or damaged.
        OSError: the tree cannot be written.
    """
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        order = {"deleted": 0, "dir": 1, "file": 2, "symlink": 2}
        for entry in sorted(entries, key=lambda e: (order[e.kind], e.path)):
            _place(root, root_fd, entry, store)
    except BlobError as exc:
        raise RebuildError(f"stored content is missing or damaged: {exc}") from exc
    finally:
        os.close(root_fd)


def _existing_dirs(root: Path) -> set[str]:
    """Every directory below ``root`` (the top-level ``.git`` aside)."""
    found: set[str] = set()
    for top, dirs, _files, top_fd in os.fwalk(root):
        relative = os.path.relpath(top, root)
        prefix = "" if relative == "." else relative + "/"
        real = [
            name
            for name in dirs
            if stat.S_ISDIR(os.stat(name, dir_fd=top_fd, follow_symlinks=False).st_mode)
            and not (not prefix and name == _GIT)
        ]
        dirs[:] = real
        found.update(prefix + name for name in real)
    return found


def _apply_dirs(root: Path, dirs: Sequence[StateEntry]) -> None:
    """Make the tree's directories exactly ``dirs``, with their modes."""
    wanted = {entry.path for entry in dirs}
    apply_entries(root, dirs, None)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for path in sorted(_existing_dirs(root) - wanted, key=lambda p: -p.count("/")):
            parts = _parts(path)
            parent = _enter(root, root_fd, parts[:-1], create=False)
            try:
                os.rmdir(parts[-1], dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ENOTEMPTY:
                    raise RebuildError(
                        f"{path} holds files the trial's final state does not"
                    ) from exc
                raise
            finally:
                os.close(parent)
    finally:
        os.close(root_fd)


def _apply_modes(root: Path, entries: Sequence[StateEntry]) -> None:
    """Set modes deepest first, so a directory made read-only does not block its children."""
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for entry in sorted(entries, key=lambda e: (-e.path.count("/"), e.path)):
            _chmod(root, root_fd, entry)
    finally:
        os.close(root_fd)


def _apply_final(root: Path, state: FinalState, store: BlobStore) -> None:
    """Apply the agent's changes, its ``chmod``s, the final directories and ``.git``."""
    apply_entries(root, state.changes, store)
    _apply_dirs(root, state.dirs)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        _remove_at(root_fd, _GIT, root / _GIT)
    finally:
        os.close(root_fd)
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
