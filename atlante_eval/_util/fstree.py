"""Walk and remove directory trees without recursion, never following a symbolic link.

Both keep an explicit stack of the directories being visited. Only the deepest
:data:`OPEN_DIRS` of them hold an open descriptor, so a tree nested thousands of
levels deep needs neither Python recursion nor thousands of descriptors: an
ancestor whose descriptor was given up is reopened through ``..`` and must have
the device and inode it had. Every directory is opened relative to its parent
with ``O_NOFOLLOW``, so an entry swapped for a symbolic link is never followed.

A directory the agent made unreadable (``chmod 000``) is given back the
permission bits the walk needs (owner read and search; write too for removal)
before it is entered; that is the only change either makes to what they visit
(besides removal).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "OPEN_DIRS",
    "RemovalFailure",
    "Unreadable",
    "WalkEntry",
    "open_file_at",
    "remove_tree",
    "walk_tree",
]

#: Most directory descriptors a walk or a removal holds open at once.
OPEN_DIRS = 16

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_PATH_FLAGS = getattr(os, "O_PATH", 0) | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_READ = stat.S_IRUSR | stat.S_IXUSR
_ALL = stat.S_IRWXU


@dataclass(frozen=True, slots=True)
class WalkEntry:
    """A non-directory entry met by :func:`walk_tree`."""

    path: str
    """Path relative to the walk's root, ``/``-separated (undecodable bytes as surrogates)."""
    name: str
    """The entry's name in its directory."""
    dir_fd: int
    """Descriptor of its directory, valid until the walk moves on."""
    info: os.stat_result
    """Its ``lstat``."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A directory :func:`walk_tree` could not list, even after granting itself access."""

    path: str
    """Path relative to the walk's root."""
    reason: str
    """Why it could not be listed."""


@dataclass(frozen=True, slots=True)
class RemovalFailure:
    """Part of a tree :func:`remove_tree` could not remove."""

    path: str
    """The first path that could not be removed."""
    reason: str
    """Why (the operating system's words)."""
    count: int = 1
    """How many entries could not be removed."""


@dataclass(slots=True)
class _Frame:
    rel: str
    """This directory's path relative to the root, with a trailing ``/`` (``""``: the root)."""
    name: str
    fd: int | None
    dev: int
    ino: int
    entries: Iterator[os.DirEntry[str]] = field(default_factory=lambda: iter(()))


class _Stack:
    """The directories being visited; only the deepest :data:`OPEN_DIRS` keep a descriptor."""

    def __init__(self, root_fd: int) -> None:
        info = os.fstat(root_fd)
        self.frames = [_Frame("", "", root_fd, info.st_dev, info.st_ino)]
        self._first_open = 1  # frames[1:_first_open] have given up their descriptor

    @property
    def top(self) -> _Frame:
        return self.frames[-1]

    def push(self, name: str, fd: int) -> _Frame:
        info = os.fstat(fd)
        frame = _Frame(self.top.rel + name + "/", name, fd, info.st_dev, info.st_ino)
        self.frames.append(frame)
        if len(self.frames) - self._first_open > OPEN_DIRS:
            shallow = self.frames[self._first_open]
            if shallow.fd is not None:
                os.close(shallow.fd)
                shallow.fd = None
            self._first_open += 1
        return frame

    def pop(self) -> _Frame:
        """Leave the top directory; its parent gets a descriptor back if it gave it up."""
        frame = self.frames.pop()
        parent = self.frames[-1]
        try:
            if parent.fd is None and frame.fd is not None:
                fd = os.open("..", _DIR_FLAGS, dir_fd=frame.fd)
                info = os.fstat(fd)
                if (info.st_dev, info.st_ino) != (parent.dev, parent.ino):
                    os.close(fd)
                    raise OSError(errno.ESTALE, "a directory was moved during the walk")
                parent.fd = fd
                self._first_open = len(self.frames) - 1
        finally:
            if frame.fd is not None:
                os.close(frame.fd)
                frame.fd = None
        return frame

    def enter(self, name: str, fd: int) -> None:
        """List the directory ``name`` open at ``fd`` and push it; on failure ``fd`` is closed.

        Raises:
            OSError: it cannot be listed.
        """
        try:
            listing = _list(fd)
        except OSError:
            os.close(fd)
            raise
        self.push(name, fd).entries = iter(listing)

    def visit(
        self, left: Callable[[_Frame, int], None] | None = None
    ) -> Iterator[tuple[_Frame, os.DirEntry[str]]]:
        """Yield each entry with its directory, depth first, until the root has none left.

        A directory the caller pushes with :meth:`enter` between two entries is visited
        next. A directory with no entries left is popped, then passed to ``left``
        with its parent's descriptor.
        """
        while True:
            top = self.top
            entry = next(top.entries, None)
            if entry is not None:
                yield top, entry
                continue
            if len(self.frames) == 1:
                return
            done = self.pop()
            if left is not None:
                parent_fd = self.top.fd
                assert parent_fd is not None
                left(done, parent_fd)

    def close(self) -> None:
        for frame in self.frames:
            if frame.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(frame.fd)
                frame.fd = None

    def __enter__(self) -> _Stack:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @classmethod
    def open(cls, root: Path, bits: int) -> _Stack:
        """Open and list the directory ``root``, granting ``bits`` first if needed.

        Raises:
            OSError: it cannot be opened or listed.
        """
        root_fd = _open_dir(None, root, bits)
        try:
            stack = cls(root_fd)
            stack.top.entries = iter(_list(root_fd))
        except BaseException:
            os.close(root_fd)
            raise
        return stack


def _grant(dir_fd: int | None, name: str | Path, bits: int) -> None:
    """Add ``bits`` to the mode of the directory ``name`` without following a symbolic link."""
    opened = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
    try:
        mode = stat.S_IMODE(os.fstat(opened).st_mode)
        if mode & bits != bits:
            # An O_PATH descriptor cannot be fchmod()ed; its /proc link reaches the inode.
            os.chmod(f"/proc/self/fd/{opened}", mode | bits)
    finally:
        os.close(opened)


def _ensure(fd: int, bits: int) -> None:
    """Give an open directory the owner ``bits`` it lacks (when we own it)."""
    info = os.fstat(fd)
    if info.st_mode & bits != bits and info.st_uid == os.geteuid():
        os.fchmod(fd, stat.S_IMODE(info.st_mode) | bits)


def _open_dir(dir_fd: int | None, name: str | Path, bits: int) -> int:
    """Open a directory (never through a symlink), granting ``bits`` first if needed."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        _grant(dir_fd, name, bits)
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    with contextlib.suppress(OSError):  # not ours to change: the listing says if it matters
        _ensure(fd, bits)
    return fd


def _list(fd: int) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as entries:
        return list(entries)


def open_file_at(dir_fd: int, name: str) -> int:
    """Open a regular file for reading (never through a symlink), granting owner read if needed.

    Raises:
        OSError: it cannot be opened.
    """
    flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise
        descriptor = os.open(name, os.O_PATH | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{descriptor}", stat.S_IMODE(info.st_mode) | stat.S_IRUSR)
        finally:
            os.close(descriptor)
        return os.open(name, flags, dir_fd=dir_fd)


def walk_tree(
    root: Path, *, skip_top: frozenset[str] = frozenset(), dirs: bool = False
) -> Iterator[WalkEntry | Unreadable]:
    """Yield every non-directory entry below ``root`` and every directory it cannot list.

    Directories are entered, and yielded too (before their entries) when ``dirs``;
    names in ``skip_top`` are skipped at the top level only. Order: depth first,
    each directory's entries in the order the file system lists them.

    Raises:
        OSError: ``root`` itself cannot be opened, or the tree changed under the walk.
    """
    with _Stack.open(root, _READ) as stack:
        for top, entry in stack.visit():
            if top.rel == "" and entry.name in skip_top:
                continue
            fd = top.fd
            assert fd is not None
            rel = top.rel + entry.name
            try:
                info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as exc:
                yield Unreadable(rel, exc.strerror or str(exc))
                continue
            if not stat.S_ISDIR(info.st_mode):
                yield WalkEntry(rel, entry.name, fd, info)
                continue
            if dirs:
                yield WalkEntry(rel, entry.name, fd, info)
            try:
                child = _open_dir(fd, entry.name, _READ)
            except FileNotFoundError:
                continue
            except OSError as exc:
                yield Unreadable(rel, exc.strerror or str(exc))
                continue
            try:
                stack.enter(entry.name, child)
            except OSError as exc:
                yield Unreadable(rel, exc.strerror or str(exc))


class _Failures:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.first: RemovalFailure | None = None
        self.count = 0

    def add(self, rel: str, exc: OSError) -> None:
        self.count += 1
        if self.first is None:
            where = str(self.root / rel) if rel else str(self.root)
            self.first = RemovalFailure(where, exc.strerror or str(exc))

    def result(self) -> RemovalFailure | None:
        if self.first is None:
            return None
        return RemovalFailure(self.first.path, self.first.reason, self.count)


def _remove(remove: Callable[..., None], fd: int, name: str) -> None:
    """Call ``remove(name, dir_fd=fd)`` (``os.unlink`` or ``os.rmdir``); a name gone is fine.

    Refused, it grants the directory at ``fd`` owner access and tries once more.
    """
    try:
        remove(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except PermissionError:
        _ensure(fd, _ALL)
        remove(name, dir_fd=fd)


def remove_tree(path: Path) -> RemovalFailure | None:
    """Remove ``path`` and everything below it; never raises.

    Works without recursion at any depth, restores the owner permissions it needs
    (directories made unreadable or read-only), removes a symbolic link without
    following it, and keeps going past what it cannot remove.

    Returns:
        ``None`` when ``path`` is gone, else the first path left behind and why.
    """
    failures = _Failures(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        failures.add("", exc)
        return failures.result()
    if not stat.S_ISDIR(info.st_mode):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failures.add("", exc)
        return failures.result()
    try:
        _empty(path, failures)
    except OSError as exc:
        failures.add("", exc)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if failures.first is None:
            failures.add("", exc)
    return failures.result()


def _empty(path: Path, failures: _Failures) -> None:
    """Remove everything inside the directory ``path``."""

    def left(done: _Frame, parent_fd: int) -> None:
        try:
            _remove(os.rmdir, parent_fd, done.name)
        except OSError as exc:
            failures.add(done.rel.rstrip("/"), exc)

    with _Stack.open(path, _ALL) as stack:
        for top, entry in stack.visit(left):
            fd = top.fd
            assert fd is not None
            rel = top.rel + entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir:
                    _remove(os.unlink, fd, entry.name)
                    continue
                child = _open_dir(fd, entry.name, _ALL)
            except FileNotFoundError:
                continue
            except OSError as exc:
                failures.add(rel, exc)
                continue
            try:
                stack.enter(entry.name, child)
            except OSError as exc:
                failures.add(rel, exc)
