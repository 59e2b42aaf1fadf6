"""The process groups :func:`~atlante_eval.trial.process.run_process` started, and their strays.

:data:`LIVE_GROUPS` is the one piece of process-wide state in this package: a
second Ctrl-C must kill every host process group at once, without waiting for
the engine (:func:`kill_all_process_groups`). A process that left its group
(a ``setsid`` daemon, a double fork) survives the group's SIGKILL; a swept run
marks its child's environment with :data:`SWEEP_ENV`, and :func:`sweep` finds
and kills every process still carrying the mark. :func:`descendants` lists a
process's live descendants, for signalling the processes inside a confinement.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = [
    "LIVE_GROUPS",
    "SWEEP_ENV",
    "LiveGroups",
    "descendants",
    "kill_all_process_groups",
    "sweep",
]

#: Environment variable that marks every process of a swept ``run_process`` call.
SWEEP_ENV = "ATLANTE_EVAL_PROCESS"


class LiveGroups:
    """Process groups (and sweep markers) started by ``run_process``, still alive."""

    def __init__(self) -> None:
        self.pids: set[int] = set()
        """Leaders of the live process groups."""
        self.confined: set[int] = set()
        """The live leaders started through a spawn wrapper (their confinement)."""
        self.markers: set[str] = set()
        """The sweep markers of the live swept runs."""

    def kill_all(self) -> None:
        """SIGKILL every live group, then sweep every live marker."""
        for pid in list(self.pids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        sweep(*self.markers)


#: The live groups of this process.
LIVE_GROUPS = LiveGroups()


def kill_all_process_groups() -> None:
    """SIGKILL every process group this process started and has not reaped yet."""
    LIVE_GROUPS.kill_all()


def _carries(pid: str, items: frozenset[bytes]) -> bool:
    """Whether process ``pid`` started with one of ``items`` in its environment (``/proc``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return not items.isdisjoint(handle.read().split(b"\0"))
    except OSError:
        return False


def sweep(*markers: str) -> int:
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


def descendants(pid: int) -> list[int]:
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
