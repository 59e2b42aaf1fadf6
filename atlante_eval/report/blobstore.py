"""The run directory's store of file contents: content-addressed, compressed, shared by trials.

A trial's final state (:mod:`.final_state`) names file contents by their SHA-256;
the contents live once per run in ``final-state/objects/<2 hex>/<62 hex>``, so
the fixture files every trial's ``.git`` holds, or a file ten trials wrote alike,
are stored once. Each object is one byte saying how the rest is stored (``z``:
zlib, ``r``: raw, for contents that do not compress) followed by the content.

The run directory is within the agent's reach, so nothing read back is trusted:
an object is opened without following links, never read beyond the size its
manifest gives, and refused unless its content hashes to its name. Objects are
created exclusively under their name, never overwritten, and not flushed one
by one (a crash loses at most objects whose trial then cannot be regraded, and
says so).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import threading
import zlib
from collections.abc import Callable, Iterator

from .run_files import RunFiles

__all__ = [
    "OBJECTS_DIR",
    "STORE_DIR",
    "BlobError",
    "BlobStore",
    "is_digest",
]

#: The run directory's subdirectory of final-state data.
STORE_DIR = "final-state"
#: Where the contents go, below :data:`STORE_DIR`.
OBJECTS_DIR = "objects"

_CHUNK = 1 << 20
_LEVEL = 6
#: Contents whose first chunk shrinks less than this are stored raw.
_WORTH = 0.9
_ZLIB, _RAW = b"z", b"r"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_HEX = frozenset("0123456789abcdef")


class BlobError(Exception):
    """Raised by :meth:`BlobStore.read` for a content that is missing, too large or damaged."""


def is_digest(text: str) -> bool:
    """Whether ``text`` is a lowercase SHA-256 hex digest (an object's name)."""
    return len(text) == 64 and set(text) <= _HEX


def _chunks(fd: int) -> Iterator[bytes]:
    while chunk := os.read(fd, _CHUNK):
        yield chunk


class BlobStore:
    """The content store of one run directory, held open by descriptor.

    Use as a context manager (or call :meth:`close`). Thread-safe: objects are
    created exclusively, so trials store at once.
    """

    def __init__(self, fd: int) -> None:
        """Wrap an open descriptor of ``final-state/objects`` (owned)."""
        self._fd = fd
        self._shards: dict[str, int] = {}
        """Descriptors of the ``<2 hex>`` directories opened so far."""
        self._known: set[str] = set()
        """Digests this store has seen stored (no need to look again)."""
        self._lock = threading.Lock()

    @classmethod
    def open(cls, run: RunFiles, *, create: bool = True) -> BlobStore | None:
        """The store of ``run`` (``None``: missing and not ``create``d, or a level is a link)."""
        fd = run.open_dir([STORE_DIR, OBJECTS_DIR], create=create)
        return None if fd is None else cls(fd)

    def close(self) -> None:
        """Close the store's descriptors."""
        with self._lock:
            for shard in self._shards.values():
                os.close(shard)
            self._shards.clear()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> BlobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _shard(self, digest: str, *, create: bool) -> int:
        """The (cached, store-owned) descriptor of the object's ``<2 hex>`` directory.

        Raises:
            OSError: it is missing (and not ``create``), a symlink or not a directory.
        """
        name = digest[:2]
        with self._lock:
            cached = self._shards.get(name)
            if cached is not None:
                return cached
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=self._fd)
            fd = os.open(name, _DIR_FLAGS, dir_fd=self._fd)
            self._shards[name] = fd
            return fd

    def has(self, digest: str) -> bool:
        """Whether an object named ``digest`` is stored (as a regular file)."""
        if digest in self._known:
            return True
        try:
            shard = self._shard(digest, create=False)
            info = os.stat(digest[2:], dir_fd=shard, follow_symlinks=False)
        except OSError:
            return False
        if stat.S_ISREG(info.st_mode):
            self._known.add(digest)
            return True
        return False

    def put_bytes(self, data: bytes) -> tuple[str, int]:
        """Store ``data``; return its digest and the bytes this added (0: already stored)."""
        digest = hashlib.sha256(data).hexdigest()
        if self.has(digest):
            return digest, 0
        return digest, self._write(digest, iter((data,)))

    def put_file(self, fd: int) -> tuple[str, int]:
        """Store the content of the open regular file ``fd`` (read from its start).

        The file is hashed first and compressed only when the store lacks it.

        Raises:
            OSError: it cannot be read, or it changed between the two reads.
        """
        os.lseek(fd, 0, os.SEEK_SET)
        digest = hashlib.sha256()
        for chunk in _chunks(fd):
            digest.update(chunk)
        name = digest.hexdigest()
        if self.has(name):
            return name, 0
        os.lseek(fd, 0, os.SEEK_SET)
        check = hashlib.sha256()

        def hashed() -> Iterator[bytes]:
            for chunk in _chunks(fd):
                check.update(chunk)
                yield chunk

        added = self._write(name, hashed(), verify=lambda: check.hexdigest() == name)
        return name, added

    def _write(
        self, digest: str, chunks: Iterator[bytes], verify: Callable[[], bool] | None = None
    ) -> int:
        """Create the object ``digest`` from ``chunks``; return its size on disk.

        It is created exclusively under its final name (a crash can leave it short:
        reading it back then fails its hash, and its trial says it cannot be rebuilt).
        """
        shard = self._shard(digest, create=True)
        name = digest[2:]
        try:
            out = os.open(name, _NEW_FLAGS, 0o644, dir_fd=shard)
        except FileExistsError:
            self._known.add(digest)
            return 0  # stored meanwhile by another trial
        try:
            try:
                written = _encode(out, chunks)
            finally:
                os.close(out)
            if verify is not None and not verify():
                raise OSError("the file changed while it was stored")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=shard)
            raise
        self._known.add(digest)
        return written

    def read(self, digest: str, *, size: int) -> bytes:
        """Return the content named ``digest``, which must be ``size`` bytes long.

        Raises:
            BlobError: it is missing, not a regular file, larger than ``size`` once
                decoded, or does not hash to its name.
        """
        if not is_digest(digest):
            raise BlobError(f"not a content digest: {digest[:80]!r}")
        try:
            shard = self._shard(digest, create=False)
            fd = os.open(digest[2:], _READ_FLAGS, dir_fd=shard)
        except OSError as exc:
            raise BlobError(f"content {digest[:12]} is missing from the store") from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BlobError(f"content {digest[:12]} is not a regular file")
            data = _decode(fd, size)
        except OSError as exc:
            raise BlobError(f"content {digest[:12]} cannot be read: {exc}") from exc
        finally:
            os.close(fd)
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise BlobError(f"content {digest[:12]} is damaged (it does not match its name)")
        return data

    def copy_to(self, other: BlobStore, digest: str) -> None:
        """Give ``other`` the object ``digest`` (a hard link, else a copy), if it lacks it.

        Raises:
            OSError: the object cannot be linked or copied.
        """
        if other.has(digest):
            return
        source = self._shard(digest, create=False)
        target = other._shard(digest, create=True)
        try:
            os.link(digest[2:], digest[2:], src_dir_fd=source, dst_dir_fd=target)
        except FileExistsError:
            pass
        except OSError:
            self._copy(digest, source, target)  # another file system
        other._known.add(digest)

    @staticmethod
    def _copy(digest: str, source: int, target: int) -> None:
        fd = os.open(digest[2:], _READ_FLAGS, dir_fd=source)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"content {digest[:12]} is not a regular file")
            temporary = f".tmp-{secrets.token_hex(8)}"
            out = os.open(temporary, _NEW_FLAGS, 0o644, dir_fd=target)
            try:
                for chunk in _chunks(fd):
                    _write_all(out, chunk)
            finally:
                os.close(out)
            try:
                os.link(temporary, digest[2:], src_dir_fd=target, dst_dir_fd=target)
            except FileExistsError:
                pass
            finally:
                os.unlink(temporary, dir_fd=target)
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)


def _encode(out: int, chunks: Iterator[bytes]) -> int:
    """Write ``chunks`` to ``out``, zlib-compressed unless the first chunk does not shrink."""
    first = next(chunks, b"")
    squeezed = zlib.compress(first, _LEVEL) if first else b""
    if first and len(squeezed) > len(first) * _WORTH:
        written = _write_all(out, _RAW) + _write_all(out, first)
        for chunk in chunks:
            written += _write_all(out, chunk)
        return written
    compressor = zlib.compressobj(_LEVEL)
    written = _write_all(out, _ZLIB) + _write_all(out, compressor.compress(first))
    for chunk in chunks:
        written += _write_all(out, compressor.compress(chunk))
    return written + _write_all(out, compressor.flush())


def _decode(fd: int, size: int) -> bytes:
    """Read an object, decoding at most ``size + 1`` bytes of content (no zip bomb)."""
    kind = os.read(fd, 1)
    if kind == _RAW:
        parts: list[bytes] = []
        total = 0
        while total <= size and (data := os.read(fd, min(_CHUNK, size + 1 - total))):
            parts.append(data)
            total += len(data)
        return b"".join(parts)
    if kind != _ZLIB:
        raise OSError("unknown object encoding")
    decompressor = zlib.decompressobj()
    parts = []
    total = 0
    try:
        for chunk in _chunks(fd):
            while chunk and total <= size:
                piece = decompressor.decompress(chunk, size + 1 - total)
                parts.append(piece)
                total += len(piece)
                chunk = decompressor.unconsumed_tail
            if total > size:
                break
    except zlib.error as exc:
        raise OSError(f"damaged compressed data: {exc}") from exc
    return b"".join(parts)
