"""The baseline commit of a fresh sandbox repository, written in-process.

``git add``, ``git commit`` and ``git pack-objects`` cost a trial three processes
and, through ``git add``'s loose objects, a directory per object prefix. Where the
sandbox's repository is the run's fresh skeleton and its tree is plain (regular
readable files and symbolic links whose names git takes as they are), this module
writes what they would: the blobs and trees in one pack (git's pack and index
formats, version 2) in the private directory, the same pack in the sandbox's
repository, the commit as a loose object there (and in memory, for the grading
repository), the sandbox's index with each file's stat (so ``git status`` is
clean) and the branch. Anything else returns ``None`` and the caller
runs git as before.

Every file is read through the same descriptor-relative walk as the snapshot,
never through a symbolic link, and must still have the stat the snapshot
recorded; a file that changed since is a reason to let git do it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from .._util.fstree import Unreadable, WalkEntry, open_file_at, walk_tree
from .gitindex import IndexEntry, IndexRecord, store_loose, write_index
from .treestate import TreeSnapshot

__all__ = ["WrittenBaseline", "write_baseline"]

#: The branch the skeleton's ``HEAD`` names (``init.defaultBranch``).
BRANCH = "atlante-eval"
#: The baseline commit's author and committer, as the git calls configure them.
IDENTITY = b"atlante-eval <atlante-eval@atlante.local>"
MESSAGE = b"atlante-eval baseline\n"
#: Largest tree written here (pack offsets stay 32-bit); bigger ones go to git.
MAX_BYTES = 1 << 30
_CHUNK = 1 << 20
#: Pack files are read-only, as git writes them (the sandbox's are links to the private ones).
_READ_ONLY = 0o444
_BLOB, _TREE = 3, 2
_TYPE_NAMES = {_BLOB: b"blob", _TREE: b"tree"}
#: Names git refuses or treats specially in a tree (compared in lower case, with
#: trailing dots and spaces removed): left to git.
_RESERVED = frozenset({".git", "git~1"})
_SPECIAL_LINKS = frozenset({".gitmodules", ".gitattributes", ".gitignore", ".mailmap"})


@dataclass(frozen=True, slots=True)
class WrittenBaseline:
    """The baseline commit written here."""

    commit: str
    commit_object: bytes
    """The commit object's content: it is not in the pack, so that the pack of one
    tree is the same file in every trial (a final state stores it once)."""
    entries: dict[str, IndexEntry]
    pack_digests: dict[str, str]


def _plain_name(component: str, *, link: bool) -> bool:
    folded = component.lower().rstrip(". ")
    return not (
        folded in _RESERVED
        or folded.startswith("git~")
        or "\\" in component
        or ":" in component
        or (link and component.lower() in _SPECIAL_LINKS)
    )


def _eligible(snapshot: TreeSnapshot) -> bool:
    """Whether git would commit exactly ``snapshot``'s entries, as they are."""
    if snapshot.total_bytes > MAX_BYTES:
        return False
    for path, state in snapshot.entries.items():
        if not snapshot.plain_entry(path):
            return False
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            return False
        parts = path.split("/")
        if "" in parts or not all(_plain_name(p, link=False) for p in parts[:-1]):
            return False
        if not _plain_name(parts[-1], link=state.target is not None):
            return False
    return True


@dataclass
class _Pack:
    """A pack file being written: objects appended, their offsets and CRCs kept."""

    out: BinaryIO
    count: int
    offset: int = 0
    digest: hashlib._Hash = field(default_factory=lambda: hashlib.sha1(usedforsecurity=False))
    sha256: hashlib._Hash = field(default_factory=hashlib.sha256)
    objects: list[tuple[bytes, int, int]] = field(default_factory=list)
    """(object id, crc32, offset) of each object."""

    def __post_init__(self) -> None:
        self._write(b"PACK" + struct.pack(">II", 2, self.count))

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.digest.update(data)
        self.sha256.update(data)
        self.offset += len(data)

    def add(self, kind: int, size: int, chunks: Iterator[bytes]) -> bytes:
        """Append one object of ``size`` bytes from ``chunks``; return its id."""
        start = self.offset
        byte, rest = (kind << 4) | (size & 0x0F), size >> 4
        header = bytearray()
        while rest:
            header.append(byte | 0x80)
            byte, rest = rest & 0x7F, rest >> 7
        header.append(byte)
        object_id = hashlib.sha1(_TYPE_NAMES[kind] + b" %d\0" % size, usedforsecurity=False)
        crc = zlib.crc32(header)
        self._write(bytes(header))
        squeeze = zlib.compressobj(1)
        seen = 0
        for chunk in chunks:
            seen += len(chunk)
            object_id.update(chunk)
            packed = squeeze.compress(chunk)
            crc = zlib.crc32(packed, crc)
            self._write(packed)
        if seen != size:
            raise _Changed
        packed = squeeze.flush()
        crc = zlib.crc32(packed, crc)
        self._write(packed)
        oid = object_id.digest()
        self.objects.append((oid, crc, start))
        return oid

    def finish(self) -> bytes:
        """Write the trailer; return the pack's checksum."""
        if len(self.objects) != self.count:
            raise _Changed
        checksum = self.digest.digest()
        self.out.write(checksum)
        self.sha256.update(checksum)
        return checksum

    def index(self, checksum: bytes) -> bytes:
        """The pack's ``.idx`` (version 2)."""
        ordered = sorted(self.objects)
        fanout = [0] * 256
        for oid, _, _ in ordered:
            fanout[oid[0]] += 1
        total = 0
        for first in range(256):
            total += fanout[first]
            fanout[first] = total
        body = b"".join(
            [
                b"\xfftOc" + struct.pack(">I", 2),
                struct.pack(">256I", *fanout),
                *(oid for oid, _, _ in ordered),
                *(struct.pack(">I", crc) for _, crc, _ in ordered),
                *(struct.pack(">I", offset) for _, _, offset in ordered),
                checksum,
            ]
        )
        return body + hashlib.sha1(body, usedforsecurity=False).digest()


class _Changed(Exception):
    """The tree is not as the snapshot recorded it (or not plain): git writes the baseline."""


def _file_chunks(fd: int, size: int) -> Iterator[bytes]:
    left = size
    while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
        yield chunk
        left -= len(chunk)


def _stat_fields(info: os.stat_result, mode: int, size: int) -> tuple[int, ...]:
    return (
        int(info.st_ctime),
        info.st_ctime_ns % 1_000_000_000,
        int(info.st_mtime),
        info.st_mtime_ns % 1_000_000_000,
        info.st_dev,
        info.st_ino,
        mode,
        info.st_uid,
        info.st_gid,
        size,
    )


def _add_entry(pack: _Pack, item: WalkEntry, snapshot: TreeSnapshot) -> IndexRecord:
    """Pack one file or link, checked against the snapshot; return its index record."""
    before = snapshot.entries.get(item.path)
    if before is None:
        raise _Changed
    if stat.S_ISLNK(item.info.st_mode):
        target = os.readlink(item.name, dir_fd=item.dir_fd)
        if target != before.target:
            raise _Changed
        content = os.fsencode(target)
        oid = pack.add(_BLOB, len(content), iter((content,)))
        return item.path, _stat_fields(item.info, 0o120000, len(content)), 0o120000, oid
    fd = open_file_at(item.dir_fd, item.name)
    try:
        info = os.fstat(fd)
        same = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns) == (
            before.ino,
            before.size,
            before.mtime_ns,
            before.ctime_ns,
        )
        if not (stat.S_ISREG(info.st_mode) and same):
            raise _Changed
        mode = 0o100755 if info.st_mode & stat.S_IXUSR else 0o100644
        oid = pack.add(_BLOB, info.st_size, _file_chunks(fd, info.st_size))
    finally:
        os.close(fd)
    return item.path, _stat_fields(info, mode, info.st_size), mode, oid


def _directories(paths: list[str]) -> set[str]:
    found = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add("/".join(parts[:depth]))
    return found


def _add_trees(pack: _Pack, records: list[IndexRecord]) -> bytes:
    """Pack the tree of every directory, deepest first; return the root tree's id."""
    children: dict[str, list[tuple[bytes, bytes]]] = {}
    for path, _, mode, oid in records:
        parent, _, name = path.rpartition("/")
        children.setdefault(parent, []).append((b"%o %s" % (mode, name.encode()), oid))
    for directory in sorted(_directories([r[0] for r in records]), key=len, reverse=True):
        entries = children.get(directory, [])
        # git orders a tree's entries by name, a directory's name as if it ended in "/"
        entries.sort(key=lambda e: e[0].split(b" ", 1)[1] + (b"/" if e[0][:1] == b"4" else b""))
        body = b"".join(head + b"\0" + oid for head, oid in entries)
        oid = pack.add(_TREE, len(body), iter((body,)))
        if directory:
            parent, _, name = directory.rpartition("/")
            children.setdefault(parent, []).append((b"40000 " + name.encode(), oid))
        else:
            return oid
    raise AssertionError("the root directory is always listed")


def _commit_body(tree: bytes, when: int) -> bytes:
    signature = IDENTITY + b" %d +0000" % when
    return b"tree %s\nauthor %s\ncommitter %s\n\n%s" % (
        tree.hex().encode(),
        signature,
        signature,
        MESSAGE,
    )


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        target.write_bytes(source.read_bytes())


def write_baseline(
    sandbox: Path, snapshot: TreeSnapshot, private_git_dir: Path
) -> WrittenBaseline | None:
    """Commit ``sandbox`` (whose ``.git`` is a fresh skeleton) without git.

    Args:
        sandbox: the sandbox root.
        snapshot: its entries, just taken (:func:`~.treestate.take_snapshot`).
        private_git_dir: the new, empty private directory for the pack.

    Returns:
        The commit, or ``None`` when git must write it (the tree is not plain or
        changed since the snapshot); nothing of the sandbox's repository was
        written then.

    Raises:
        OSError: the sandbox's repository could not be written.
    """
    if not _eligible(snapshot):
        return None
    trees = len(_directories(list(snapshot.entries)))
    temporary = private_git_dir / "baseline.tmp"
    try:
        with temporary.open("wb") as out:
            pack = _Pack(out, count=len(snapshot.entries) + trees)
            records: list[IndexRecord] = []
            for item in walk_tree(sandbox, skip_top=frozenset({".git"})):
                if isinstance(item, Unreadable):
                    raise _Changed
                records.append(_add_entry(pack, item, snapshot))
            if len(records) != len(snapshot.entries):
                raise _Changed
            body = _commit_body(_add_trees(pack, records), int(time.time()))
            checksum = pack.finish()
            os.fchmod(out.fileno(), _READ_ONLY)
    except (_Changed, OSError):  # git reports what it cannot read, as before
        temporary.unlink(missing_ok=True)
        return None
    name = f"baseline-{checksum.hex()}"
    pack_file = private_git_dir / f"{name}.pack"
    temporary.replace(pack_file)
    index = pack.index(checksum)
    descriptor = os.open(
        private_git_dir / f"{name}.idx", os.O_WRONLY | os.O_CREAT | os.O_EXCL, _READ_ONLY
    )
    with os.fdopen(descriptor, "wb") as out:
        out.write(index)
    dot_git = sandbox / ".git"
    shared = dot_git / "objects" / "pack" / f"pack-{checksum.hex()}"
    _link_or_copy(pack_file, shared.with_suffix(".pack"))
    _link_or_copy(private_git_dir / f"{name}.idx", shared.with_suffix(".idx"))
    commit = hashlib.sha1(b"commit %d\0" % len(body) + body, usedforsecurity=False).digest()
    store_loose(dot_git / "objects", commit, body, kind=b"commit")
    write_index(dot_git / "index", records)
    (dot_git / "refs" / "heads" / BRANCH).write_text(commit.hex() + "\n", encoding="ascii")
    return WrittenBaseline(
        commit=commit.hex(),
        commit_object=body,
        entries={path: (mode, oid) for path, _, mode, oid in records},
        pack_digests={
            f"{name}.pack": pack.sha256.hexdigest(),
            f"{name}.idx": hashlib.sha256(index).hexdigest(),
        },
    )
