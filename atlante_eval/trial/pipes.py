"""A child's pipes: created here, read as they stream with bounded memory, fed, closed.

:class:`Pipes` owns every descriptor of a child's three pipes. :func:`pump_lines`
reads stdout as it streams, keeps a bounded part of it (:class:`TailBuffer`, or
:class:`HeadBuffer` for output read from its start) and hands each line to a
callback; :func:`pump` keeps the end of stderr; :func:`feed` writes stdin and
closes it. Nothing here blocks the event loop: the parent's ends are non-blocking.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.lowlevel

__all__ = [
    "MAX_LINE_BYTES",
    "OVERLONG_TAIL_BYTES",
    "HeadBuffer",
    "Pipes",
    "TailBuffer",
    "feed",
    "pump",
    "pump_lines",
]

#: Longest stdout line handed to a line callback; longer lines are dropped.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: How much of the end of a dropped over-long line is handed to ``on_overlong``.
OVERLONG_TAIL_BYTES = 1024 * 1024
_CHUNK = 64 * 1024


class TailBuffer:
    """Keep the last ``limit`` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self.total = 0

    def write(self, data: bytes) -> None:
        """Append ``data``, dropping the oldest bytes beyond the limit."""
        if not data or self.limit <= 0:
            self.total += len(data)
            return
        self.total += len(data)
        self._chunks.append(data[-self.limit :])
        self._size += min(len(data), self.limit)
        while self._size - len(self._chunks[0]) >= self.limit:
            self._size -= len(self._chunks.pop(0))

    def value(self) -> bytes:
        """The kept bytes (at most ``limit``)."""
        data = b"".join(self._chunks)
        return data[-self.limit :] if self.limit > 0 else b""

    def text(self) -> str:
        """The kept bytes decoded as UTF-8 (invalid bytes replaced)."""
        return self.value().decode("utf-8", errors="replace")


class HeadBuffer(TailBuffer):
    """Keep the first ``limit`` bytes written to it; ``full`` once more arrived."""

    def write(self, data: bytes) -> None:
        """Append what still fits of ``data``."""
        self.total += len(data)
        room = self.limit - self._size
        if room > 0:
            kept = data[:room]
            self._chunks.append(kept)
            self._size += len(kept)

    @property
    def full(self) -> bool:
        """Whether more than ``limit`` bytes were written."""
        return self.total > self.limit

    def value(self) -> bytes:
        """The first bytes (at most ``limit``)."""
        return b"".join(self._chunks)


async def _chunks(fd: int) -> AsyncIterator[bytes]:
    """Yield what arrives on the non-blocking pipe ``fd`` until end of file."""
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            await anyio.wait_readable(fd)
            continue
        except OSError:
            return
        if not chunk:
            return
        yield chunk
        await anyio.lowlevel.checkpoint()


async def pump_lines(  # noqa: C901 - one read loop: caps, line splitting and the hooks
    fd: int,
    tail: TailBuffer,
    on_line: Callable[[str], bool] | None,
    abort: anyio.Event,
    sink: Callable[[bytes], None] | None = None,
    on_overlong: Callable[[bytes], None] | None = None,
) -> None:
    """Read ``fd`` to its end, handing each line to ``on_line``.

    A line longer than :data:`MAX_LINE_BYTES` is dropped, not buffered; once it
    ends, ``on_overlong`` (if any) gets its last :data:`OVERLONG_TAIL_BYTES`, so a
    reader can still tell what was written at its end (a host's own line glued
    behind a flood, say).
    """
    pending = bytearray()
    skipping = False
    dropped = TailBuffer(OVERLONG_TAIL_BYTES if on_overlong is not None else 0)
    async for chunk in _chunks(fd):
        tail.write(chunk)
        if sink is not None:
            sink(chunk)
        if isinstance(tail, HeadBuffer) and tail.full:
            abort.set()
        if on_line is None or abort.is_set():
            continue
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                if skipping:
                    dropped.write(chunk[start:])
                else:
                    pending += chunk[start:]
                    if len(pending) > MAX_LINE_BYTES:
                        dropped.write(bytes(pending[-OVERLONG_TAIL_BYTES:]))
                        pending.clear()
                        skipping = True
                break
            if not skipping:
                pending += chunk[start:newline]
                if _deliver(bytes(pending), on_line):
                    abort.set()
            elif on_overlong is not None:
                dropped.write(chunk[start:newline])
                on_overlong(dropped.value())
                dropped = TailBuffer(OVERLONG_TAIL_BYTES)
            pending.clear()
            skipping = False
            start = newline + 1
            if abort.is_set():
                break
    tail_line = bool(pending) and on_line is not None and not skipping and not abort.is_set()
    if tail_line and on_line is not None and _deliver(bytes(pending), on_line):
        abort.set()


def _deliver(line: bytes, on_line: Callable[[str], bool]) -> bool:
    text = line.decode("utf-8", errors="replace").strip()
    return bool(text) and on_line(text)


async def pump(fd: int, tail: TailBuffer) -> None:
    async for chunk in _chunks(fd):
        tail.write(chunk)


class Pipes:
    """The three pipes of a child, created here so this module owns every descriptor.

    The parent's ends are non-blocking and are closed by :meth:`close`, whatever
    holds the child's ends (a grandchild that left the process group cannot keep
    a descriptor of ours open).
    """

    def __init__(self, *, with_stdin: bool) -> None:
        self._open: list[int] = []
        stdin_pair: tuple[int | None, int | None] = self._pipe() if with_stdin else (None, None)
        self.stdin_read, self.stdin_write = stdin_pair
        self.stdout_read, self.stdout_write = self._pipe()
        self.stderr_read, self.stderr_write = self._pipe()
        for fd in (self.stdin_write, self.stdout_read, self.stderr_read):
            if fd is not None:
                os.set_blocking(fd, False)

    def _pipe(self) -> tuple[int, int]:
        read, write = os.pipe()
        self._open += [read, write]
        return read, write

    def close_child_ends(self) -> None:
        """Close the ends the child inherited (after spawning)."""
        for fd in (self.stdin_read, self.stdout_write, self.stderr_write):
            if fd is not None:
                self.close(fd)

    def close(self, fd: int | None = None) -> None:
        """Close ``fd`` (default: every descriptor still open) once."""
        for each in list(self._open) if fd is None else [fd]:
            if each in self._open:
                self._open.remove(each)
                with contextlib.suppress(OSError):
                    os.close(each)


async def feed(pipes: Pipes, fd: int, data: bytes) -> None:
    """Write ``data`` to the child's stdin, then close it (end of file)."""
    view = memoryview(data)
    try:
        while view:
            try:
                written = os.write(fd, view[:_CHUNK])
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
            view = view[written:]
            await anyio.lowlevel.checkpoint()
    except OSError:
        pass
    finally:
        pipes.close(fd)
