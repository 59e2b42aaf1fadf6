"""What a sandbox held at its baseline, and every path that differs from it now.

The engine decides which paths changed by itself, from a walk of the sandbox
(:mod:`.fstree`), not from git: git skips what it cannot read, collapses a
nested repository to one path and fails on one without a commit, and ignores
every ``.git`` entry below the root; the walk sees every file.

At the baseline, :func:`take_snapshot` records each entry's type, size, owner
execute bit, times, inode and symlink target; the baseline commit supplies each
file's blob id (:meth:`TreeSnapshot.with_oids`). After the session,
:func:`changed_paths` walks the sandbox again. A file whose type, size or
execute bit differ has changed; one whose stat is identical, and was not
modified in the same clock tick as the snapshot ("racily clean", as git calls
it), has not; only the rest is read and hashed, as git would, and compared with
its baseline blob id. Nothing else is read, so a 10 GB file the agent made costs
a ``stat``. The sandbox's own ``.git`` at the root is not part of the tree;
anything that cannot be read counts as changed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from .._util.fstree import Unreadable, WalkEntry, open_file_at, walk_tree

__all__ = [
    "TreeSnapshot",
    "blob_id",
    "changed_paths",
    "differing_paths",
    "take_snapshot",
    "tree_digest",
]

_CHUNK = 1 << 20
_TOP_SKIP = frozenset({".git"})

# Entry kinds.
_FILE, _LINK, _OTHER, _UNREADABLE = "f", "l", "o", "u"


@dataclass(frozen=True, slots=True)
class _State:
    kind: str
    executable: bool
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int
    target: str | None = None
    """A symbolic link's target."""
    oid: bytes | None = None
    """A regular file's blob id at the baseline."""
    mode: int = 0
    """Permission bits (``st_mode & 0o7777``)."""


@dataclass(frozen=True, slots=True)
class TreeSnapshot:
    """Every entry of a sandbox at its baseline."""

    entries: Mapping[str, _State]
    stamp_ns: int
    """The file system's clock when the walk ended: entries touched since are racy."""
    total_bytes: int
    """Sum of the regular files' sizes (for time limits)."""

    def racy(self, state: _State) -> bool:
        """Whether a change in the snapshot's clock tick could leave ``state``'s stat as it is."""
        return state.mtime_ns >= self.stamp_ns or state.ctime_ns >= self.stamp_ns

    def mode_of(self, path: str) -> int | None:
        """The permission bits a regular file had (``None``: no regular file there)."""
        state = self.entries.get(path)
        return state.mode if state is not None and state.kind == _FILE else None

    def plain_entry(self, path: str) -> bool:
        """Whether ``path`` is a symbolic link or a regular file its owner may read."""
        state = self.entries.get(path)
        if state is None:
            return False
        return state.kind == _LINK or (state.kind == _FILE and bool(state.mode & stat.S_IRUSR))

    def missing_oids(self) -> Iterator[str]:
        """Regular files without a blob id (git did not commit them: nested ``.git``, ...)."""
        return (
            path
            for path, state in self.entries.items()
            if state.kind == _FILE and state.oid is None
        )

    def with_oids(self, oids: Mapping[str, bytes]) -> TreeSnapshot:
        """Return a copy whose regular files take their blob id from ``oids``."""
        entries = dict(self.entries)
        for path, oid in oids.items():
            state = entries.get(path)
            if state is not None and state.kind == _FILE:
                entries[path] = replace(state, oid=oid)
        return replace(self, entries=entries)


def _state(item: WalkEntry) -> _State:
    info = item.info
    mode = info.st_mode
    kind = _FILE if stat.S_ISREG(mode) else _LINK if stat.S_ISLNK(mode) else _OTHER
    target = os.readlink(item.name, dir_fd=item.dir_fd) if kind == _LINK else None
    return _State(
        kind=kind,
        executable=bool(mode & stat.S_IXUSR) if kind == _FILE else False,
        size=info.st_size if kind == _FILE else 0,
        mtime_ns=info.st_mtime_ns,
        ctime_ns=info.st_ctime_ns,
        ino=info.st_ino,
        dev=info.st_dev,
        target=target,
        mode=stat.S_IMODE(mode),
    )


def _unreadable() -> _State:
    return _State(_UNREADABLE, False, 0, 0, 0, 0, 0)


def _clock_ns(directory: Path) -> int:
    """The file system's current timestamp, read from a file created for it."""
    fd, name = tempfile.mkstemp(prefix=".clock-", dir=directory)
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        os.unlink(name)


def blob_id(fd: int, size: int, *, sha256: bool = False) -> bytes:
    """Git's blob id of the open file ``fd`` of ``size`` bytes (at most ``size`` are read)."""
    digest = hashlib.sha256() if sha256 else hashlib.sha1(usedforsecurity=False)
    digest.update(b"blob %d\0" % size)
    left = size  # never past the size hashed into the header (a growing file ends here)
    while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
        digest.update(chunk)
        left -= len(chunk)
    return digest.digest()


def take_snapshot(root: Path, *, clock_dir: Path) -> TreeSnapshot:
    """Record every entry below ``root`` (not its top-level ``.git``); no file is read.

    Args:
        root: the sandbox root.
        clock_dir: a directory outside ``root`` on the same file system, where a
            file is created (and removed) to read the file system's clock.

    Raises:
        OSError: ``root`` cannot be walked.
    """
    entries: dict[str, _State] = {}
    total = 0
    for item in walk_tree(root, skip_top=_TOP_SKIP):
        if isinstance(item, Unreadable):
            entries[item.path] = _unreadable()
            continue
        state = _state(item)
        entries[item.path] = state
        total += state.size
    return TreeSnapshot(entries=entries, stamp_ns=_clock_ns(clock_dir), total_bytes=total)


def hash_missing(root: Path, snapshot: TreeSnapshot, *, sha256: bool) -> TreeSnapshot:
    """Give the regular files git did not commit a blob id computed here.

    Raises:
        OSError: the tree cannot be walked.
    """
    wanted = set(snapshot.missing_oids())
    if not wanted:
        return snapshot
    oids: dict[str, bytes] = {}
    for item in walk_tree(root, skip_top=_TOP_SKIP):
        if isinstance(item, WalkEntry) and item.path in wanted:
            oid = _hash_entry(item, sha256=sha256)
            if oid is not None:
                oids[item.path] = oid
    return snapshot.with_oids(oids)


def _hash_entry(item: WalkEntry, *, sha256: bool) -> bytes | None:
    """The blob id of a regular file entry, ``None`` when it cannot be read."""
    try:
        fd = open_file_at(item.dir_fd, item.name)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return blob_id(fd, info.st_size, sha256=sha256)
    except OSError:
        return None
    finally:
        os.close(fd)


def _differs(item: WalkEntry, before: _State, snapshot: TreeSnapshot, *, sha256: bool) -> bool:
    now = _state(item)
    if now.kind != before.kind or before.kind in (_OTHER, _UNREADABLE):
        return now.kind != before.kind or (now.ino, now.ctime_ns) != (before.ino, before.ctime_ns)
    if now.kind == _LINK:
        return now.target != before.target
    if now.executable != before.executable or now.size != before.size:
        return True
    same_stat = (now.mtime_ns, now.ctime_ns, now.ino, now.dev) == (
        before.mtime_ns,
        before.ctime_ns,
        before.ino,
        before.dev,
    )
    if same_stat and not snapshot.racy(before):
        return False
    if before.oid is None:
        return True
    return _hash_entry(item, sha256=sha256) != before.oid


def changed_paths(root: Path, snapshot: TreeSnapshot, *, sha256: bool = False) -> list[str]:
    """Every path that differs from ``snapshot`` now: added, deleted, modified, unreadable; sorted.

    Raises:
        OSError: ``root`` cannot be walked.
    """
    changed: list[str] = []
    seen: set[str] = set()
    for item in walk_tree(root, skip_top=_TOP_SKIP):
        seen.add(item.path)
        before = snapshot.entries.get(item.path)
        if isinstance(item, Unreadable) or before is None:
            changed.append(item.path)
            continue
        if _differs(item, before, snapshot, sha256=sha256):
            changed.append(item.path)
    changed.extend(path for path in snapshot.entries if path not in seen)
    return sorted(set(changed))


def differing_paths(before: TreeSnapshot, after: TreeSnapshot) -> list[str]:
    """Paths whose entry may differ between two snapshots of one tree, from their stats alone.

    No file is read: an entry whose stat is identical and was not racy in ``before``
    is the same; any other is listed (so a file rewritten with equal content may be
    listed too). Sorted.
    """
    found = [path for path in before.entries if path not in after.entries]
    for path, now in after.entries.items():
        old = before.entries.get(path)
        same = (
            old is not None
            and (old.kind, old.executable, old.size, old.target)
            == (now.kind, now.executable, now.size, now.target)
            and (old.mtime_ns, old.ctime_ns, old.ino, old.dev)
            == (now.mtime_ns, now.ctime_ns, now.ino, now.dev)
            and not before.racy(old)
        )
        if not same:
            found.append(path)
    return sorted(found)


def tree_digest(snapshot: TreeSnapshot) -> str:
    """SHA-256 over a snapshot: each path's type, exec bit and blob id or link target.

    Two sandboxes with the same digest hold the same files for every check (times
    and inodes aside).
    """
    digest = hashlib.sha256()
    for path in sorted(snapshot.entries):
        state = snapshot.entries[path]
        detail = state.oid.hex() if state.oid is not None else (state.target or "")
        line = f"{path}\0{state.kind}\0{int(state.executable)}\0{detail}\n"
        digest.update(line.encode("utf-8", errors="surrogateescape"))
    return digest.hexdigest()
