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
that forked it, and the worker threads of the event loop come and go; that
thread joins a fresh anonymous session keyring before each confined spawn
(:mod:`.keyring`), so no confined process holds the engine's keys. A wrapper
that needs more than a command line (per-trial resource limits) returns a
:class:`SpawnPlan`: descriptors the child inherits, a step run right after the
spawn, and one run once the child is gone.

A run is four steps: :func:`_command` (the command line, marked and wrapped),
:func:`_start` (spawn and track), :func:`_supervise` (read, feed, wait, end the
group, drain) and :func:`_release` (the shielded cleanup that runs whatever
happened). The child's pipes are :mod:`.pipes`; the live process groups and the
sweep of their strays are :mod:`.groups`.
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
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import anyio

from .groups import LIVE_GROUPS, SWEEP_ENV, descendants, kill_all_process_groups
from .groups import sweep as sweep_marked
from .keyring import join_fresh_session_keyring
from .pipes import MAX_LINE_BYTES, HeadBuffer, Pipes, TailBuffer, feed, pump, pump_lines

__all__ = [
    "DEFAULT_GRACE_S",
    "MAX_LINE_BYTES",
    "SWEEP_ENV",
    "HeadBuffer",
    "ProcessResult",
    "SpawnPlan",
    "SpawnWrapper",
    "TailBuffer",
    "confined_spawns",
    "kill_all_process_groups",
    "run_process",
]

#: Time between SIGTERM and SIGKILL when a process group is ended.
DEFAULT_GRACE_S = 5.0
#: How long to wait for pipes to close once the process itself has exited.
_DRAIN_S = 2.0


@dataclass(frozen=True, slots=True)
class SpawnPlan:
    """What a spawn wrapper asks for beyond a command line: descriptors and two steps."""

    argv: list[str]
    """The command line to spawn."""
    env: dict[str, str]
    """Its complete environment."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the child inherits (the wrapper owns them and closes them)."""
    after_spawn: Callable[[int], None] | None = None
    """Called (in a worker thread) with the child's pid, right after the spawn, before
    its output is read; if it raises, the child is killed and the error propagates."""
    after_exit: Callable[[], None] | None = None
    """Called (in a worker thread) once the child is ended, or when it could not start."""
    confined: bool = True
    """The child is a confinement (bubblewrap): a timeout's SIGTERM goes to the
    processes inside it, not to the confinement (see :func:`_terminate`)."""


#: Rewrites ``(argv, cwd, env)`` into the command line and environment actually spawned
#: (or a :class:`SpawnPlan`).
SpawnWrapper = Callable[
    [Sequence[str], Path, Mapping[str, str]], tuple[list[str], dict[str, str]] | SpawnPlan
]

_CONFINED: contextvars.ContextVar[SpawnWrapper | None] = contextvars.ContextVar(
    "atlante_eval_confined_spawns", default=None
)
_SPAWNER: list[ThreadPoolExecutor] = []


@contextlib.contextmanager
def confined_spawns(wrapper: SpawnWrapper | None) -> Iterator[None]:
    """Wrap every :func:`run_process` call made inside the block (and its tasks)."""
    token = _CONFINED.set(wrapper)
    try:
        yield
    finally:
        _CONFINED.reset(token)


def _spawn_in_long_lived_thread(plan: SpawnPlan, cwd: Path, fds: tuple[int, int, int]) -> Process:
    if not _SPAWNER:
        _SPAWNER.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlante-spawn"))
    return _SPAWNER[0].submit(_spawn_confined, plan, cwd, fds).result()


def _spawn_confined(plan: SpawnPlan, cwd: Path, fds: tuple[int, int, int]) -> Process:
    """Spawn a wrapped child; a confined one in a fresh session keyring (:mod:`.keyring`)."""
    if plan.confined:
        join_fresh_session_keyring()
    return _spawn(plan, cwd, fds)


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


def _spawn(plan: SpawnPlan, cwd: Path, fds: tuple[int, int, int]) -> Process:
    """Start the child (in a worker thread: a fork must not stall the event loop)."""
    return subprocess.Popen(
        plan.argv,
        stdin=fds[0],
        stdout=fds[1],
        stderr=fds[2],
        cwd=cwd,
        env=plan.env,
        start_new_session=True,
        close_fds=True,
        pass_fds=plan.pass_fds,
    )


def _after_spawn(plan: SpawnPlan, process: Process) -> None:
    """Run the plan's ``after_spawn`` step; if it fails, kill and reap the child, and re-raise."""
    if plan.after_spawn is None:
        return
    try:
        plan.after_spawn(process.pid)
    except BaseException:
        _signal_group(process, signal.SIGKILL)
        process.wait()
        raise


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


def _terminate(process: Process, *, confined: bool) -> None:
    """Ask the process to stop: SIGTERM its group, or inside a confinement its processes.

    A confining wrapper (bubblewrap) dies on SIGTERM and takes its namespace down
    with SIGKILL at once; the confined processes themselves get the SIGTERM instead,
    so a host can still end gracefully within the grace period.
    """
    if not confined:
        _signal_group(process, signal.SIGTERM)
        return
    for pid in descendants(process.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)


async def _end_group(process: Process, grace_s: float) -> None:
    """SIGTERM the group, wait ``grace_s``, then SIGKILL it, and reap the leader."""
    if process.poll() is None:
        _terminate(process, confined=process.pid in LIVE_GROUPS.confined)
        with anyio.move_on_after(grace_s):
            await _wait(process)
    _signal_group(process, signal.SIGKILL)
    with anyio.move_on_after(grace_s):
        await _wait(process)


async def run_process(
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
    on_overlong: Callable[[bytes], None] | None = None,
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
        on_overlong: called with the end of each stdout line too long for
            ``on_line`` (:data:`~atlante_eval.trial.pipes.OVERLONG_TAIL_BYTES`), when it ends.

    Cancellation of the caller ends the process group the same way (shielded) and
    re-raises the cancellation.
    """
    grace = DEFAULT_GRACE_S if grace_s is None else grace_s
    started = time.monotonic()
    kept = TailBuffer(capture_bytes) if stdout_head_bytes is None else HeadBuffer(stdout_head_bytes)
    output = _Output(
        kept, TailBuffer(capture_bytes), on_line, stdout_sink, anyio.Event(), on_overlong
    )
    marker = secrets.token_hex(16) if sweep else None
    wrapper = wrap if wrap is not None else _CONFINED.get()
    try:
        plan = _command(argv, cwd, env, marker=marker, wrapper=wrapper)
    except OSError as exc:
        return _not_started(exc, argv, started)
    pipes = Pipes(with_stdin=stdin is not None)
    try:
        process = await _start(plan, cwd, pipes, wrapped=wrapper is not None, marker=marker)
    except OSError as exc:
        await _after_exit(plan)
        return _not_started(exc, argv, started)
    except BaseException:
        await _after_exit(plan)
        raise
    try:
        timed_out, finished_ms = await _supervise(
            process, pipes, output, stdin=stdin, timeout_s=timeout_s, grace_s=grace, started=started
        )
    finally:
        await _release(process, pipes, grace_s=grace, marker=marker)
        await _after_exit(plan)
    return output.result(process.returncode, timed_out=timed_out, duration_ms=finished_ms)


@dataclass(frozen=True, slots=True)
class _Output:
    """Where a running child's output goes, and the event that asks to stop it."""

    stdout: TailBuffer
    """The kept part of stdout (its end, or its start with ``stdout_head_bytes``)."""
    stderr: TailBuffer
    """The kept end of stderr."""
    on_line: Callable[[str], bool] | None
    """Called with each stdout line; a true return asks to stop the child."""
    sink: Callable[[bytes], None] | None
    """Called with every chunk of stdout."""
    abort: anyio.Event
    """Set when the line callback or the stdout cap asks to stop the child."""
    on_overlong: Callable[[bytes], None] | None = None
    """Called with the end of each stdout line too long for ``on_line``."""

    def result(self, returncode: int | None, *, timed_out: bool, duration_ms: int) -> ProcessResult:
        """How the child ended, with what was kept of its output."""
        return ProcessResult(
            returncode=returncode,
            timed_out=timed_out,
            aborted=self.abort.is_set(),
            stdout=self.stdout.text(),
            stderr=self.stderr.text(),
            spawn_error=None,
            duration_ms=duration_ms,
            stdout_bytes=self.stdout.total,
        )


def _command(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    marker: str | None,
    wrapper: SpawnWrapper | None,
) -> SpawnPlan:
    """Return what to spawn: the command marked for the sweep, then wrapped.

    Raises:
        OSError: the wrapper could not prepare the confinement.
    """
    child_env = dict(env) if marker is None else {**env, SWEEP_ENV: marker}
    if wrapper is None or not argv:
        return SpawnPlan(list(argv), child_env, confined=False)
    wrapped = wrapper(list(argv), cwd, child_env)
    if isinstance(wrapped, SpawnPlan):
        return wrapped
    return SpawnPlan(*wrapped)


async def _start(
    plan: SpawnPlan, cwd: Path, pipes: Pipes, *, wrapped: bool, marker: str | None
) -> Process:
    """Spawn the child on the pipes' child ends, then track its group (and its sweep marker).

    A wrapped child is spawned from the long-lived thread (``--die-with-parent``);
    the plan's ``after_spawn`` step runs in a worker thread, so that thread is
    free for the next spawn meanwhile.

    Raises:
        OSError: the program could not be started; every pipe is closed.
    """
    stdin_fd = pipes.stdin_read if pipes.stdin_read is not None else subprocess.DEVNULL
    try:
        # Shielded: once the thread has started the child, it must be tracked and ended.
        with anyio.CancelScope(shield=True):
            process = await anyio.to_thread.run_sync(
                _spawn_in_long_lived_thread if wrapped else _spawn,
                plan,
                cwd,
                (stdin_fd, pipes.stdout_write, pipes.stderr_write),
            )
            if plan.after_spawn is not None:
                await anyio.to_thread.run_sync(_after_spawn, plan, process)
    except BaseException:
        pipes.close()
        raise
    pipes.close_child_ends()
    LIVE_GROUPS.pids.add(process.pid)
    if plan.confined:
        LIVE_GROUPS.confined.add(process.pid)
    if marker is not None:
        LIVE_GROUPS.markers.add(marker)
    return process


async def _supervise(
    process: Process,
    pipes: Pipes,
    output: _Output,
    *,
    stdin: bytes | None,
    timeout_s: float | None,
    grace_s: float,
    started: float,
) -> tuple[bool, int]:
    """Read the output and feed stdin until the child exits, times out or is stopped.

    Then end its group (SIGTERM, ``grace_s``, SIGKILL) and drain the pipes for a
    bounded time. Returns whether the timeout expired, and the milliseconds from
    ``started`` to the end (before the drain). An error raised by a reader (the
    line callback's) propagates unwrapped.
    """
    done = (anyio.Event(), anyio.Event())
    try:
        # Once the process has ended, the bounded drain below is shielded: a caller's
        # deadline that passes while a grandchild holds the pipes must not turn a
        # session that ended in time into a cancelled one.
        with anyio.CancelScope() as ended:
            async with anyio.create_task_group() as readers:
                stdout = pump_lines(
                    pipes.stdout_read,
                    output.stdout,
                    output.on_line,
                    output.abort,
                    output.sink,
                    output.on_overlong,
                )
                readers.start_soon(_signal_when_done, stdout, done[0])
                readers.start_soon(
                    _signal_when_done, pump(pipes.stderr_read, output.stderr), done[1]
                )
                if stdin is not None and pipes.stdin_write is not None:
                    readers.start_soon(feed, pipes, pipes.stdin_write, stdin)
                with anyio.move_on_after(math.inf if timeout_s is None else timeout_s) as timer:
                    await _first_of(_wait(process), output.abort.wait())
                ended.shield = True
                timed_out = timer.cancelled_caught and process.poll() is None
                finished_ms = _elapsed_ms(started)
                if process.poll() is None:
                    await _end_group(process, grace_s)
                with anyio.move_on_after(_DRAIN_S):
                    await done[0].wait()
                    await done[1].wait()
                _signal_group(process, signal.SIGKILL)
                readers.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        _raise_single(group)
    return timed_out, finished_ms


async def _release(process: Process, pipes: Pipes, *, grace_s: float, marker: str | None) -> None:
    """End whatever is left of the child, shielded: its group, its pipes, its strays.

    Runs however :func:`_supervise` ended (also on cancellation or a callback's
    error); then the child is no longer tracked.
    """
    with anyio.CancelScope(shield=True):
        if process.poll() is None:
            await _end_group(process, grace_s)
        _signal_group(process, signal.SIGKILL)
        pipes.close()
        with anyio.move_on_after(DEFAULT_GRACE_S):
            await _wait(process)
        LIVE_GROUPS.pids.discard(process.pid)
        LIVE_GROUPS.confined.discard(process.pid)
        if marker is not None:
            await anyio.to_thread.run_sync(sweep_marked, marker)
            LIVE_GROUPS.markers.discard(marker)


async def _after_exit(plan: SpawnPlan) -> None:
    """Run the plan's ``after_exit`` step, shielded, off the event loop."""
    if plan.after_exit is not None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(plan.after_exit)


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


def _raise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
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


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
