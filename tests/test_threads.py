"""The CLI's run lends out as many worker threads at once as the process has CPUs."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from stubcli import run_to_first_session

from atlante_eval._util import threads

#: Pin the run to one CPU before the CLI loads; at the first session's spawn (in a worker
#: thread), ask the event loop how many worker threads it lends out at once.
_ONE_CPU = """
import anyio.from_thread, anyio.to_thread
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
"""
_LOOP_LIMIT = (
    "anyio.from_thread.run_sync(lambda: anyio.to_thread.current_default_thread_limiter()"
    ".total_tokens)"
)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_the_run_command_lends_as_many_worker_threads_as_it_has_cpus(tmp_path: Path) -> None:
    """On one CPU the run's loop lends two threads at once (anyio's default is 40)."""
    limit, started = run_to_first_session(
        tmp_path, setup=_ONE_CPU, observe=_LOOP_LIMIT, trials=2, args=("--jobs", "4")
    )
    assert started == 2
    assert limit == 2


@pytest.mark.parametrize(("cpus", "expected"), [(1, 2), (2, 2), (6, 6), (64, 40)])
def test_worker_threads_follow_the_usable_cpus_within_bounds(
    monkeypatch: pytest.MonkeyPatch, cpus: int, expected: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert threads.worker_threads() == expected


def test_cap_worker_threads_sets_the_running_loops_limit() -> None:
    """The cap is the running loop's own: a later loop starts with anyio's default again."""

    async def capped() -> tuple[float, float]:
        before = anyio.to_thread.current_default_thread_limiter().total_tokens
        threads.cap_worker_threads()
        return before, anyio.to_thread.current_default_thread_limiter().total_tokens

    async def fresh() -> float:
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    before, after = anyio.run(capped)
    assert (before, after) == (40, threads.worker_threads())
    assert anyio.run(fresh) == 40
