"""Git index files read and written in-process, so a trial starts no git for them.

After the baseline commit, the sandbox's index (written by ``git add`` a moment
before, while no agent has run) names every committed path with its mode and
object id: :func:`read_index` takes them from there instead of a ``git ls-tree``
process. At grading, :func:`write_grading_index` writes the grading repository's
index from those entries (kept in memory since the baseline), without the paths
that are gone and with the changed files hashed here and stored as loose objects:
``git read-tree`` and ``git update-index`` are not needed, and ``git diff
--cached`` compares it with the baseline commit as before.

Only the plain formats are read (versions 2 and 3, no split or sparse index): for
anything else :func:`read_index` returns ``None`` and the caller asks git.
Entries are written with no stat data, as ``git read-tree`` writes them, so git
never trusts a cached stat over the content.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._util.fstree import open_file_at

__all__ = [
    "IndexEntry",
    "IndexRecord",
    "hash_worktree_file",
    "read_index",
    "store_loose",
    "write_grading_index",
    "write_index",
]

#: One index entry: the file mode git records (``0o100644``, ``0o100755``,
#: ``0o120000`` for a symbolic link, ``0o160000`` for a nested repository) and its object id.
IndexEntry = tuple[int, bytes]
#: One entry as written: path, stat fields (ctime and mtime as seconds and
#: nanoseconds, dev, ino, mode, uid, gid, size), mode and object id.
IndexRecord = tuple[str, tuple[int, ...], int, bytes]

_HEADER = struct.Struct(">4sII")
_STAT_BYTES = 40  # ctime, mtime (seconds, nanoseconds), dev, ino, mode, uid, gid, size
_EXTENDED = 0x4000
_NAME_MASK = 0xFFF
_KNOWN_MODES = frozenset({0o100644, 0o100755, 0o120000, 0o160000})
#: Extensions that mean the entries listed are not the whole index (split, sparse).
_PARTIAL = frozenset({b"link", b"sdir"})


def _digest(sha256: bool) -> hashlib._Hash:
    return hashlib.sha256() if sha256 else hashlib.sha1(usedforsecurity=False)


def read_index(path: Path, *, sha256: bool) -> dict[str, IndexEntry] | None:
    """Every stage-0 entry of the index at ``path``: path → (mode, object id).

    Returns:
        ``None`` when the file is not a whole index this reader knows (another
        version, a split or sparse index, a conflict, a bad checksum); the caller
        then asks git.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return None
    oid_size = 32 if sha256 else 20
    if len(data) < _HEADER.size + oid_size:
        return None
    body, trailer = data[:-oid_size], data[-oid_size:]
    checksum = _digest(sha256)
    checksum.update(body)
    if checksum.digest() != trailer:
        return None
    signature, version, count = _HEADER.unpack_from(body)
    if signature != b"DIRC" or version not in (2, 3):
        return None
    try:
        entries, offset = _entries(body, count, oid_size=oid_size)
    except (struct.error, ValueError, UnicodeError):
        return None
    if entries is None or _has_partial_extension(body, offset):
        return None
    return entries


def _entries(body: bytes, count: int, *, oid_size: int) -> tuple[dict[str, IndexEntry] | None, int]:
    entries: dict[str, IndexEntry] = {}
    offset = _HEADER.size
    for _ in range(count):
        start = offset
        mode = struct.unpack_from(">I", body, offset + 24)[0]
        offset += _STAT_BYTES
        oid = body[offset : offset + oid_size]
        offset += oid_size
        flags = struct.unpack_from(">H", body, offset)[0]
        offset += 2
        if flags & _EXTENDED:
            offset += 2
        end = body.index(b"\0", offset)
        if (flags & _NAME_MASK) != _NAME_MASK and end - offset != flags & _NAME_MASK:
            return None, offset
        name = body[offset:end]
        # 1 to 8 NULs pad each entry to a multiple of 8 bytes.
        offset = start + ((end - start + 8) & ~7)
        if (flags >> 12) & 3 or mode not in _KNOWN_MODES or len(oid) != oid_size:
            return None, offset
        entries[os.fsdecode(name)] = (mode, oid)
    return entries, offset


def _has_partial_extension(body: bytes, offset: int) -> bool:
    while offset + 8 <= len(body):
        signature, size = struct.unpack_from(">4sI", body, offset)
        if signature in _PARTIAL:
            return True
        offset += 8 + size
    return False


def hash_worktree_file(dir_fd: int, name: str, *, sha256: bool) -> tuple[IndexEntry, bytes] | None:
    """The entry and content of the file or symbolic link ``name`` in ``dir_fd``, as git adds it.

    A symbolic link's content is its target; a regular file is opened
    non-blocking, never through a link, and read once up to the size it had when
    opened. Returns ``None`` when it is neither (or cannot be read).
    """
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            mode, content = 0o120000, os.fsencode(os.readlink(name, dir_fd=dir_fd))
        elif stat.S_ISREG(info.st_mode):
            fd = open_file_at(dir_fd, name)
            try:
                opened = os.fstat(fd)
                if not stat.S_ISREG(opened.st_mode):
                    return None
                mode = 0o100755 if opened.st_mode & stat.S_IXUSR else 0o100644
                content = _read_to(fd, opened.st_size)
            finally:
                os.close(fd)
        else:
            return None
    except OSError:
        return None
    digest = _digest(sha256)
    digest.update(b"blob %d\0" % len(content))
    digest.update(content)
    return (mode, digest.digest()), content


def _read_to(fd: int, size: int) -> bytes:
    """At most ``size`` bytes of ``fd`` (a file still growing ends at the size it had)."""
    parts: list[bytes] = []
    left = size
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def store_loose(objects: Path, oid: bytes, content: bytes, *, kind: bytes = b"blob") -> None:
    """Write an object (a blob unless ``kind`` says otherwise) loose into ``objects``."""
    name = oid.hex()
    directory = objects / name[:2]
    directory.mkdir(exist_ok=True)
    target = directory / name[2:]
    if target.exists():
        return
    target.write_bytes(zlib.compress(kind + b" %d\0" % len(content) + content, 1))


def write_grading_index(
    repository: Path,
    baseline: Mapping[str, IndexEntry],
    *,
    remove: Sequence[str],
    add: Mapping[str, tuple[IndexEntry, bytes]],
    sha256: bool,
) -> None:
    """Write the index: ``baseline`` without ``remove``, with ``add`` stored and staged.

    Entries carry no stat data (as ``git read-tree`` writes them); every added
    content is written as a loose object first.
    """
    entries = dict(baseline)
    for path in remove:
        entries.pop(path, None)
    objects = repository / "objects"
    for path, (entry, content) in add.items():
        store_loose(objects, entry[1], content)
        entries[path] = entry
    zeros = (0,) * 10  # no stat data
    write_index(
        repository / "index",
        [(path, zeros, mode, oid) for path, (mode, oid) in entries.items()],
        sha256=sha256,
    )


def write_index(path: Path, records: Sequence[IndexRecord], *, sha256: bool = False) -> None:
    """Write an index (version 2) of ``records``, in git's order (by path bytes)."""
    encoded = sorted((os.fsencode(name), fields, mode, oid) for name, fields, mode, oid in records)
    parts = [_HEADER.pack(b"DIRC", 2, len(encoded))]
    for name, fields, mode, oid in encoded:
        values = list(fields)
        values[6] = mode
        fixed = struct.pack(">10I", *(value & 0xFFFFFFFF for value in values)) + oid
        fixed += struct.pack(">H", min(len(name), _NAME_MASK))
        size = len(fixed) + len(name)
        parts.append(fixed + name + b"\0" * (8 - size % 8))
    body = b"".join(parts)
    checksum = _digest(sha256)
    checksum.update(body)
    path.write_bytes(body + checksum.digest())
