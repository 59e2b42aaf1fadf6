"""Run one subprocess safely: no shell, its own process group, bounded output.

:func:`run_process` is the only way this package starts a program (hosts, setup,
command checks, git). The child gets a new session, so the whole process group can
be signalled. Output is read as it streams, line by line for stdout, and only a
bounded tail of each stream is kept, so a program that prints gigabytes cannot
exhaust memory. On timeout, abort or cancellation the group is ended in order:
SIGTERM, a grace period, SIGKILL, then the pipes are drained for a bounded time,
so a program that ignores SIGTERM or leaves grandchildren holding its pipes
cannot hang the caller.

A *spawn wrapper* (:data:`SpawnWrapper`) may rewrite the command line and
environment just before the spawn: ``--isolation os`` confines setup and
command checks by passing one, and host sessions through
:func:`confined_spawns`, so every process a host starts is confined without the
host knowing (a host cannot forget it). Wrapped programs are started from one
long-lived thread: bubblewrap's ``--die-with-parent`` is tied to the thread
that forked it, and the worker threads of the event loop come and go.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.lowlevel

__all__ = [
    "DEFAULT_GRACE_S",
    "MAX_LINE_BYTES",
    "SWEEP_ENV",
    "HeadBuffer",
    "ProcessResult",
    "SpawnWrapper",
    "TailBuffer",
    "confined_spawns",
    "kill_all_process_groups",
    "run_process",
]

#: Time between SIGTERM and SIGKILL when a process group is ended.
DEFAULT_GRACE_S = 5.0
#: Longest stdout line handed to a line callback; longer lines are dropped.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: How long to wait for pipes to close once the process itself has exited.
_DRAIN_S = 2.0
_CHUNK = 64 * 1024


#: Environment variable that marks every process of a swept :func:`run_process` call.
SWEEP_ENV = "ATLANTE_EVAL_PROCESS"

#: Rewrites ``(argv, cwd, env)`` into the command line and environment actually spawned.
SpawnWrapper = Callable[[Sequence[str], Path, Mapping[str, str]], tuple[list[str], dict[str, str]]]

_CONFINED: contextvars.ContextVar[SpawnWrapper | None] = contextvars.ContextVar(
    "atlante_eval_confined_spawns", default=None
)
_SPAWNER: list[ThreadPoolExecutor] = []
#: Pids of live processes started through a spawn wrapper (ended by :func:`_terminate`).
_CONFINED_PIDS: set[int] = set()


@contextlib.contextmanager
def confined_spawns(wrapper: SpawnWrapper | None) -> Iterator[None]:
    """Wrap every :func:`run_process` call made inside the block (and its tasks)."""
    token = _CONFINED.set(wrapper)
    try:
        yield
    finally:
        _CONFINED.reset(token)


def _spawn_in_long_lived_thread(
    argv: list[str], cwd: Path, env: dict[str, str], fds: tuple[int, int, int]
) -> Process:
    if not _SPAWNER:
        _SPAWNER.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlante-spawn"))
    return _SPAWNER[0].submit(_spawn, argv, cwd, env, fds).result()


class _LiveGroups:
    """Process groups (and sweep markers) started by :func:`run_process`, still alive.

    The one piece of process-wide state in this package: a second Ctrl-C must
    kill every host process group at once, without waiting for the engine.
    """

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.markers: set[str] = set()

    def kill_all(self) -> None:
        for pid in list(self.pids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        _sweep(*self.markers)


def _carries(pid: str, items: frozenset[bytes]) -> bool:
    """Whether process ``pid`` started with one of ``items`` in its environment (``/proc``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return not items.isdisjoint(handle.read().split(b"\0"))
    except OSError:
        return False


def _sweep(*markers: str) -> int:
    """SIGKILL every process (but this one) whose environment carries one of ``markers``.

    Finds descendants that left their process group (``setsid`` daemons, double
    forks) and so survive the group's SIGKILL. Each process is signalled through a
    pidfd after its environment is read again, so a reused pid is never hit.
    Returns how many were killed. Does nothing where ``/proc`` is missing.
    """
    if not markers:
        return 0
    items = frozenset(f"{SWEEP_ENV}={marker}".encode() for marker in markers)
    try:
        candidates = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return 0
    own = str(os.getpid())
    killed = 0
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    for pid in candidates:
        if pid == own or not _carries(pid, items):
            continue
        if pidfd_open is None or send is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
            continue
        try:
            pidfd = pidfd_open(int(pid))
        except OSError:
            continue
        try:
            if _carries(pid, items):
                send(pidfd, signal.SIGKILL)
                killed += 1
        except OSError:
            pass
        finally:
            os.close(pidfd)
    return killed


_LIVE = _LiveGroups()


def kill_all_process_groups() -> None:
    """SIGKILL every process group this process started and has not reaped yet."""
    _LIVE.kill_all()


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


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """How a subprocess ended and the tails of its output."""

    returncode: int | None
    """Exit status; negative for a signal (as :mod:`subprocess`); ``None`` if it never ran."""
    timed_out: bool
    """The timeout expired before the process exited."""
    aborted: bool
    """The line callback asked to stop the process."""
    stdout: str
    """The last ``capture_bytes`` of stdout."""
    stderr: str
    """The last ``capture_bytes`` of stderr."""
    spawn_error: str | None
    """Why the program could not be started (e.g. not found)."""
    duration_ms: int
    """Wall time from spawn to exit."""
    stdout_bytes: int = 0
    """Total bytes the process wrote to stdout."""

    @property
    def exit(self) -> int | None:
        """The exit code, or ``None`` when the process ended by a signal or never ran."""
        if self.returncode is None or self.returncode < 0:
            return None
        return self.returncode

    @property
    def signal_name(self) -> str | None:
        """Name of the signal that ended the process, if one did."""
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


Process = subprocess.Popen[bytes]


def _spawn(argv: list[str], cwd: Path, env: dict[str, str], fds: tuple[int, int, int]) -> Process:
    """Start the child (in a worker thread: a fork must not stall the event loop)."""
    return subprocess.Popen(
        argv,
        stdin=fds[0],
        stdout=fds[1],
        stderr=fds[2],
        cwd=cwd,
        env=env,
        start_new_session=True,
        close_fds=True,
    )


async def _wait(process: Process) -> int:
    """Wait for ``process`` to exit without a thread: a pidfd where Linux has one."""
    if process.poll() is not None:
        return process.returncode
    pidfd: int | None = None
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        with contextlib.suppress(OSError):
            pidfd = pidfd_open(process.pid)
    try:
        delay = 0.002
        while process.poll() is None:
            if pidfd is not None:
                await anyio.wait_readable(pidfd)
            else:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.05)
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return process.returncode


def _signal_group(process: Process, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group led by ``process`` (or to it alone)."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, parents first (from ``/proc``; empty without it)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop(0)
        found.append(child)
        pending.extend(children.get(child, []))
    return found


def _terminate(process: Process, *, confined: bool) -> None:
    """Ask the process to stop: SIGTERM its group, or inside a confinement its processes.

    A confining wrapper (bubblewrap) dies on SIGTERM and takes its namespace down
    with SIGKILL at once; the confined processes themselves get the SIGTERM instead,
    so a host can still end gracefully within the grace period.
    """
    if not confined:
        _signal_group(process, signal.SIGTERM)
        return
    for pid in _descendants(process.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)


async def _end_group(process: Process, grace_s: float) -> None:
    """SIGTERM the group, wait ``grace_s``, then SIGKILL it, and reap the leader."""
    if process.poll() is None:
        _terminate(process, confined=process.pid in _CONFINED_PIDS)
        with anyio.move_on_after(grace_s):
            await _wait(process)
    _signal_group(process, signal.SIGKILL)
    with anyio.move_on_after(grace_s):
        await _wait(process)


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


async def _pump_lines(  # noqa: C901 - one read loop: caps, line splitting and the abort hook together
    fd: int,
    tail: TailBuffer,
    on_line: Callable[[str], bool] | None,
    abort: anyio.Event,
    sink: Callable[[bytes], None] | None = None,
) -> None:
    pending = bytearray()
    skipping = False
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
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > MAX_LINE_BYTES:
                        pending.clear()
                        skipping = True
                break
            if not skipping:
                pending += chunk[start:newline]
                if _deliver(bytes(pending), on_line):
                    abort.set()
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


async def _pump(fd: int, tail: TailBuffer) -> None:
    async for chunk in _chunks(fd):
        tail.write(chunk)


class _Pipes:
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


async def run_process(  # noqa: PLR0915 - the ordered end of a process (terminate, grace, kill, drain, wait) reads best in one place
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float | None = None,
    stdin: bytes | None = None,
    on_line: Callable[[str], bool] | None = None,
    capture_bytes: int = 64 * 1024,
    stdout_head_bytes: int | None = None,
    grace_s: float | None = None,
    sweep: bool = False,
    stdout_sink: Callable[[bytes], None] | None = None,
    wrap: SpawnWrapper | None = None,
) -> ProcessResult:
    """Run ``argv`` without a shell in its own process group and wait for it.

    Args:
        argv: program and arguments.
        cwd: working directory.
        env: the complete environment of the child.
        timeout_s: wall-clock limit; on expiry the group is ended and
            ``timed_out`` is set. ``None`` waits forever (or until cancelled).
        stdin: bytes written to the child's stdin, which is then closed; ``None``
            connects stdin to /dev/null.
        on_line: called with each non-empty stdout line (decoded, stripped); a
            true return value ends the group and sets ``aborted``. An exception it
            raises ends the group and propagates.
        capture_bytes: how much of the end of stdout and stderr to keep.
        stdout_head_bytes: keep the *first* bytes of stdout instead, and end the
            process (``aborted``) once more than this many arrived.
        grace_s: time between SIGTERM and SIGKILL (default :data:`DEFAULT_GRACE_S`,
            read at call time).
        sweep: mark the child's environment with a fresh :data:`SWEEP_ENV` value
            and, once the group is ended, also kill every process still carrying
            it: descendants that left the process group (daemons). Best effort
            (Linux ``/proc``; a program that drops the variable escapes it).
        stdout_sink: called with every chunk of stdout as it arrives, all of it
            (uncapped, whatever ``capture_bytes``), for output read as a stream.
        wrap: rewrite the command before it is spawned (OS isolation); default:
            the wrapper of the enclosing :func:`confined_spawns` block, if any.

    Cancellation of the caller ends the process group the same way (shielded) and
    re-raises the cancellation.
    """
    grace = DEFAULT_GRACE_S if grace_s is None else grace_s
    started = time.monotonic()
    stdout_tail: TailBuffer = (
        HeadBuffer(stdout_head_bytes)
        if stdout_head_bytes is not None
        else TailBuffer(capture_bytes)
    )
    stderr_tail = TailBuffer(capture_bytes)
    marker = secrets.token_hex(16) if sweep else None
    child_env = dict(env) if marker is None else {**env, SWEEP_ENV: marker}
    wrapper = wrap if wrap is not None else _CONFINED.get()
    spawn_argv = list(argv)
    if wrapper is not None and spawn_argv:
        try:
            spawn_argv, child_env = wrapper(spawn_argv, cwd, child_env)
        except OSError as exc:
            return _not_started(exc, argv, started)
    pipes = _Pipes(with_stdin=stdin is not None)
    stdin_fd = pipes.stdin_read if pipes.stdin_read is not None else subprocess.DEVNULL
    try:
        # Shielded: once the thread has started the child, it must be tracked and ended.
        with anyio.CancelScope(shield=True):
            process = await anyio.to_thread.run_sync(
                _spawn if wrapper is None else _spawn_in_long_lived_thread,
                spawn_argv,
                cwd,
                child_env,
                (stdin_fd, pipes.stdout_write, pipes.stderr_write),
            )
    except OSError as exc:
        pipes.close()
        return _not_started(exc, argv, started)
    except BaseException:
        pipes.close()
        raise
    pipes.close_child_ends()
    _LIVE.pids.add(process.pid)
    if wrapper is not None:
        _CONFINED_PIDS.add(process.pid)
    if marker is not None:
        _LIVE.markers.add(marker)
    abort = anyio.Event()
    done = (anyio.Event(), anyio.Event())
    timed_out = False
    finished_ms: int | None = None
    try:
        # Once the process has ended, the bounded drain below is shielded: a caller's
        # deadline that passes while a grandchild holds the pipes must not turn a
        # session that ended in time into a cancelled one.
        with anyio.CancelScope() as ended:
            async with anyio.create_task_group() as readers:
                readers.start_soon(
                    _signal_when_done,
                    _pump_lines(pipes.stdout_read, stdout_tail, on_line, abort, stdout_sink),
                    done[0],
                )
                readers.start_soon(
                    _signal_when_done, _pump(pipes.stderr_read, stderr_tail), done[1]
                )
                if stdin is not None and pipes.stdin_write is not None:
                    readers.start_soon(_feed, pipes, pipes.stdin_write, stdin)
                with anyio.move_on_after(math.inf if timeout_s is None else timeout_s) as timer:
                    await _first_of(_wait(process), abort.wait())
                ended.shield = True
                timed_out = timer.cancelled_caught and process.poll() is None
                finished_ms = _elapsed_ms(started)
                if process.poll() is None:
                    await _end_group(process, grace)
                with anyio.move_on_after(_DRAIN_S):
                    await done[0].wait()
                    await done[1].wait()
                _signal_group(process, signal.SIGKILL)
                readers.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        _raise_single(group)
    finally:
        with anyio.CancelScope(shield=True):
            if process.poll() is None:
                await _end_group(process, grace)
            _signal_group(process, signal.SIGKILL)
            pipes.close()
            with anyio.move_on_after(DEFAULT_GRACE_S):
                await _wait(process)
            _LIVE.pids.discard(process.pid)
            _CONFINED_PIDS.discard(process.pid)
            if marker is not None:
                await anyio.to_thread.run_sync(_sweep, marker)
                _LIVE.markers.discard(marker)
    return ProcessResult(
        returncode=process.returncode,
        timed_out=timed_out,
        aborted=abort.is_set(),
        stdout=stdout_tail.text(),
        stderr=stderr_tail.text(),
        spawn_error=None,
        duration_ms=finished_ms if finished_ms is not None else _elapsed_ms(started),
        stdout_bytes=stdout_tail.total,
    )


def _not_started(exc: OSError, argv: Sequence[str], started: float) -> ProcessResult:
    return ProcessResult(
        returncode=None,
        timed_out=False,
        aborted=False,
        stdout="",
        stderr="",
        spawn_error=f"{exc.strerror or exc}: {exc.filename or argv[0]}",
        duration_ms=_elapsed_ms(started),
    )


def _raise_single(group: BaseExceptionGroup[BaseException]) -> None:
    """Re-raise the one error of a reader task group unwrapped, else the group."""
    errors = [e for e in group.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
    if len(errors) == 1 and isinstance(errors[0], Exception):
        raise errors[0]
    raise group


async def _signal_when_done(work: Awaitable[None], done: anyio.Event) -> None:
    try:
        await work
    finally:
        done.set()


async def _first_of(*awaitables: Awaitable[object]) -> None:
    """Return as soon as any of ``awaitables`` completes; cancel the others."""
    async with anyio.create_task_group() as group:

        async def _one(awaitable: Awaitable[object]) -> None:
            await awaitable
            group.cancel_scope.cancel()

        for awaitable in awaitables:
            group.start_soon(_one, awaitable)


async def _feed(pipes: _Pipes, fd: int, data: bytes) -> None:
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


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
