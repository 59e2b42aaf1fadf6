"""How many worker threads a command's event loop lends out at once.

A run hands its short blocking work to worker threads (``anyio.to_thread``):
assembling a sandbox, writing its baseline, preparing the grading repository,
starting a process, recording the final state, removing the sandbox; a trial
takes about fourteen such hops. anyio lends up to 40 threads at once, but the
work is mostly Python, which one interpreter runs a thread at a time: with four
trials at once on two CPUs, a dozen threads took turns at the interpreter lock,
and handing it over (a futex wake and a context switch each time) was about a
sixth of the process's CPU. Capped at the CPUs the process may use (at least
two, so a blocking file operation still overlaps the event loop's work), the
same work took about a sixth less wall time per trial at four concurrent, and no
more sequentially or with sixteen two-second sessions at once
(docs/performance.md).

No hop waits on another hop, so a smaller pool only queues work, it cannot
deadlock: a process's exit and its pipes are awaited on the event loop, not in
a thread. Only the CLI calls this, inside the event loop it owns: a program that
awaits ``run_eval`` keeps its own loop's limit.
"""

from __future__ import annotations

import os

__all__ = ["cap_worker_threads", "worker_threads"]

#: anyio's own default, the most this ever sets.
_ANYIO_DEFAULT = 40


def worker_threads() -> int:
    """The CPUs this process may run on, at least two and at most anyio's default."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        usable = os.cpu_count() or 2
    return max(2, min(usable, _ANYIO_DEFAULT))


def cap_worker_threads() -> int:
    """Limit the running event loop's worker threads to :func:`worker_threads`; return it."""
    import anyio.to_thread

    threads = worker_threads()
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads
    return threads
