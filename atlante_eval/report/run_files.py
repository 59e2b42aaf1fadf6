"""Files a run writes into its reserved run directory, never through a symbolic link.

The run directory usually sits in the user's project, within reach of the agent
under evaluation. Whatever a trial leaves there (its transcript, the raw host
stream, long setup or check output) is therefore created relative to a
descriptor of the very directory the run reserved: every level below it is
opened with ``O_NOFOLLOW``, and a file is replaced by unlinking the name and
creating it exclusively, so a symlink or FIFO planted in advance is never
followed or opened. If the directory's path is swapped during the run, these
files still land in the reserved directory (whose report is then refused), never
where the new path points.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["TRIALS_DIR", "RunFiles", "TrialFiles", "single_component"]

#: The run directory's subdirectory that holds one directory per trial.
TRIALS_DIR = "trials"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def single_component(name: str) -> bool:
    """Whether ``name`` names one entry of a directory (no ``/``, not ``.`` or ``..``)."""
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _subdir(parent_fd: int, name: str) -> int:
    """Open (creating it if needed) the directory ``name`` below ``parent_fd``.

    Raises:
        OSError: ``name`` is a symlink or not a directory (``ELOOP``/``ENOTDIR``),
            or it cannot be created or opened.
    """
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent_fd)
    return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


class TrialFiles:
    """One trial's directory, ``trials/<scenario>/<index>``, held open by descriptor."""

    def __init__(self, fd: int, relative: str) -> None:
        """Wrap an open directory descriptor (owned: :meth:`close` closes it)."""
        self._fd = fd
        self.relative = relative
        """The directory's path relative to the run directory (POSIX separators)."""

    def path_of(self, name: str) -> str:
        """Return ``name``'s path relative to the run directory."""
        return f"{self.relative}/{name}"

    def create(self, name: str) -> BinaryIO:
        """Create ``name`` afresh for writing (whatever stood there is unlinked, not followed).

        Raises:
            OSError: the name is a directory, or the file cannot be created.
        """
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self._fd)
        fd = os.open(name, _NEW_FILE_FLAGS, 0o644, dir_fd=self._fd)
        return os.fdopen(fd, "wb")

    def read(self, name: str, *, limit: int) -> bytes | None:
        """Return the regular file ``name`` if it holds at most ``limit`` bytes, else ``None``.

        A symlink, a FIFO, a device or a file over the limit is never read.
        """
        data = self._read(name, limit=limit, whole=True)
        return data if data is not None and len(data) <= limit else None

    def read_head(self, name: str, *, limit: int) -> bytes | None:
        """Return the regular file ``name``, cut after ``limit + 1`` bytes (``None``: not one).

        More than ``limit`` bytes back says the file was longer. A symlink, a FIFO
        or a device is never read.
        """
        return self._read(name, limit=limit, whole=False)

    def _read(self, name: str, *, limit: int, whole: bool) -> bytes | None:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self._fd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or (whole and info.st_size > limit):
                return None
            return handle.read(limit + 1)

    def names(self) -> list[str]:
        """Return the names of the regular files in the directory (symlinks excluded)."""
        with os.scandir(self._fd) as entries:
            return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))

    def close(self) -> None:
        """Close the directory descriptor."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TrialFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunFiles:
    """The reserved run directory, held open by descriptor for the whole run."""

    def __init__(self, path: Path, fd: int) -> None:
        """Wrap an open descriptor of the run directory at ``path`` (owned)."""
        self.path = path
        self._fd = fd

    @classmethod
    def open(cls, path: Path, identity: tuple[int, int]) -> RunFiles:
        """Open the run directory, refusing it unless it is the one reserved.

        Args:
            path: the run directory.
            identity: its device and inode when it was reserved.

        Raises:
            OSError: it is a symlink, cannot be opened, or is another directory now.
        """
        fd = os.open(path, _DIR_FLAGS)
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != identity:
            os.close(fd)
            raise OSError(errno.ESTALE, "the run directory changed since it was reserved", path)
        return cls(path, fd)

    @classmethod
    def open_existing(cls, path: Path) -> RunFiles:
        """Open another run's directory to read from (``--resume``); no identity to check.

        Raises:
            OSError: it is a symlink or cannot be opened.
        """
        return cls(path, os.open(path, _DIR_FLAGS))

    def trial(self, scenario: str, index: int, *, create: bool = True) -> TrialFiles | None:
        """Open ``trials/<scenario>/<index>`` (created when ``create``), or ``None``.

        ``None`` when the directory is missing (and ``create`` is false), any
        level of it is a symlink or not a directory, or ``scenario`` is no single
        path component (a name read from a report may be anything).
        """
        if not single_component(scenario):
            return None
        names = [TRIALS_DIR, scenario, str(index)]
        fd = self.open_dir(names, create=create)
        return None if fd is None else TrialFiles(fd, "/".join(names))

    def open_dir(self, names: list[str], *, create: bool = True) -> int | None:
        """Open the directory ``names`` (one name per level) below the run directory.

        Returns an owned descriptor, or ``None`` when a level is missing (and
        ``create`` is false), a symlink, or not a directory.
        """
        fd = self._fd
        try:
            for name in names:
                child = _subdir(fd, name) if create else os.open(name, _DIR_FLAGS, dir_fd=fd)
                if fd != self._fd:
                    os.close(fd)
                fd = child
        except OSError:
            if fd != self._fd:
                os.close(fd)
            return None
        return fd if fd != self._fd else os.dup(fd)

    def close(self) -> None:
        """Close the run directory's descriptor."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
