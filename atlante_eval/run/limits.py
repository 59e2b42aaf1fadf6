"""Process limits a run depends on: open file descriptors.

Every job holds descriptors for a while (host pipes and pidfds, git and check
processes, fixture copies, pattern-matching threads), and with ``jobs`` above 1
up to three trials per job are in flight (assembling, in session, grading). A run
raises its soft ``RLIMIT_NOFILE`` to the hard limit at start, and runs fewer jobs
than asked when even that is too small, instead of failing trials with EMFILE.
"""

from __future__ import annotations

import contextlib

from .._util.fstree import OPEN_DIRS

__all__ = [
    "DESCRIPTORS_PER_JOB",
    "DESCRIPTOR_RESERVE",
    "jobs_for_descriptors",
    "raise_nofile_limit",
]

#: Three pipes and a pidfd: what one running subprocess holds.
_PROCESS = 4
#: Descriptors one job may hold at its busiest, three trials in flight: a session
#: (its host process, transcript, raw stream and trial directory), an assembly (one
#: git process), and a grading (a check or git process, the tree walk's open
#: directories, a pattern search's pipe).
DESCRIPTORS_PER_JOB = (_PROCESS + 3) + _PROCESS + (_PROCESS + OPEN_DIRS + 2)
#: Descriptors kept for the engine itself (journal, report, logs, the interpreter).
DESCRIPTOR_RESERVE = 64
#: Largest soft limit asked for when the hard limit is unlimited.
_UNLIMITED_TARGET = 1 << 20


def raise_nofile_limit() -> int | None:
    """Raise the soft descriptor limit to the hard limit; return the soft limit now in force.

    Returns ``None`` where the platform has no such limit (then nothing is bounded).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, _UNLIMITED_TARGET)
    if soft == resource.RLIM_INFINITY or (soft != resource.RLIM_INFINITY and soft >= target):
        return None if soft == resource.RLIM_INFINITY else soft
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def jobs_for_descriptors(jobs: int, limit: int | None) -> int:
    """Return how many of ``jobs`` fit in ``limit`` descriptors (at least 1)."""
    if limit is None:
        return jobs
    return max(1, min(jobs, (limit - DESCRIPTOR_RESERVE) // DESCRIPTORS_PER_JOB))
