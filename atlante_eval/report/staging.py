"""A run directory that appears with its first files: staged, seeded, renamed into place.

A run's directory is made under a hidden name (``.<run id>.reserving``), given its
first files by a *seed* (the run's journal, locked for the run's life), and only
then renamed to ``<run id>``, without replacing anything (``renameat2`` with
``RENAME_NOREPLACE``). A run killed at any moment leaves no run directory, or one
holding its journal; a staging directory a killed run left behind is removed by
the next reservation once no live run holds its files.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["STAGING_SUFFIX", "Seed", "rename_noreplace", "seeded", "sweep_staging"]

#: Suffix of a run directory being reserved (hidden, renamed into place once seeded).
STAGING_SUFFIX = ".reserving"
#: A staging directory with nothing in it is left alone this long (its run may be seeding it).
_STAGING_GRACE_S = 3600.0
#: Gives a run directory being reserved its first files; returns how to undo that.
Seed = Callable[[Path, str], Callable[[], None]]


def seeded(base: Path, run_id: str, seed: Seed) -> bool:
    """Make ``base/<run id>`` seeded: staged, given its first files, renamed into place.

    Returns ``False`` (with the staging directory removed) when the name is taken.
    """
    if os.path.lexists(base / run_id):
        return False
    staging = base / f".{run_id}{STAGING_SUFFIX}"
    try:
        staging.mkdir()
    except FileExistsError:
        return False
    undo: Callable[[], None] | None = None
    try:
        undo = seed(staging, run_id)
        rename_noreplace(staging, base / run_id)
    except BaseException as exc:
        if undo is not None:
            undo()
        _remove_staging(staging)
        if isinstance(exc, FileExistsError):
            return False
        raise
    return True


def _remove_staging(staging: Path) -> None:
    """Remove a staging directory and the plain files in it (nothing else is ours)."""
    with contextlib.suppress(OSError), os.scandir(staging) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                Path(entry.path).unlink()
    with contextlib.suppress(OSError):
        staging.rmdir()


def _abandoned(staging: Path) -> bool:
    """Whether no live run is seeding ``staging``: its files unlocked, or empty for long."""
    try:
        names = [entry.name for entry in staging.iterdir()]
        if not names:
            return time.time() - os.lstat(staging).st_mtime > _STAGING_GRACE_S
        for name in names:
            fd = os.open(staging / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)
    except OSError:
        return False  # locked by its run (or not ours to judge)
    return True


def sweep_staging(base: Path) -> None:
    """Remove staging directories a killed run left behind (a live run's stay)."""
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        stale = [
            Path(e.path)
            for e in entries
            if e.name.startswith(".")
            and e.name.endswith(STAGING_SUFFIX)
            and e.is_dir(follow_symlinks=False)
        ]
    for staging in stale:
        if _abandoned(staging):
            _remove_staging(staging)


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def rename_noreplace(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``; ``FileExistsError`` if ``target`` exists, even empty.

    ``rename(2)`` silently replaces an empty directory; Linux's ``renameat2`` with
    ``RENAME_NOREPLACE`` refuses instead. Where it is missing, ``target`` is
    checked first (a narrow window in which only an empty directory could be replaced).
    """
    call = getattr(_libc(), "renameat2", None)
    if call is not None:
        result = call(
            _AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE
        )
        if result == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(code, os.strerror(code), str(target))
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    source.rename(target)


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
