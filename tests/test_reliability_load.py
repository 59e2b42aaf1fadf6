"""Load and soak, reduced from bench/bench_load.py: every trial accounted for, resources flat."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from atlante_eval import process as process_module
from atlante_eval.fstree import OPEN_DIRS
from bench.bench_load import load_run, soak

#: Trials and concurrency of the reduced load run (the benchmark runs 500 at 32).
TRIALS = 150
JOBS = 32
#: Three pipes and a pidfd: what one running subprocess holds.
PROCESS_FDS = 4
#: A session: its host process, plus its transcript, raw stream and trial directory.
SESSION_FDS = PROCESS_FDS + 3
#: A trial assembling ahead: one git process at a time.
ASSEMBLY_FDS = PROCESS_FDS
#: A trial being graded: a check or git process, plus the tree walk's directory
#: descriptors (at most ``fstree.OPEN_DIRS`` open at once).
GRADING_FDS = PROCESS_FDS + OPEN_DIRS
#: Up to ``JOBS`` of each at once, plus the interpreter's own.
FD_BOUND = JOBS * (SESSION_FDS + ASSEMBLY_FDS + GRADING_FDS) + 64


@pytest.mark.slow
def test_many_trials_at_high_concurrency_are_all_accounted_for(tmp_path: Path) -> None:
    """150 stand-in trials at --jobs 32: all pass, descriptors and memory flat, nothing left."""
    result = load_run(tmp_path, trials=TRIALS, jobs=JOBS)
    assert result.status == 0
    assert result.trials == TRIALS
    assert result.verdicts == {"pass": TRIALS}
    assert result.leftover_dirs == []
    assert result.leftover_processes == []
    fds = result.samples.fds
    assert len(fds) > 20, "the run was sampled throughout"
    assert max(fds) <= FD_BOUND
    middle = len(fds) // 2
    assert statistics.median(fds[middle:]) <= statistics.median(fds[:middle]) * 1.25 + 10
    rss_first, rss_second = result.samples.halves(result.samples.rss_kib)
    assert rss_second - rss_first < 16 * 1024, (rss_first, rss_second)


@pytest.mark.slow
def test_repeated_runs_in_one_process_leak_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_eval repeated in one process: open descriptors identical, memory flat after warm-up."""
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    result = soak(tmp_path, seconds=10, trials=20, jobs=16)
    assert result.runs >= 4
    assert result.trials == 20 * result.runs
    assert len(set(result.fds[1:])) == 1, result.fds
    assert result.rss_kib[-1] - result.rss_kib[1] < 8 * 1024, result.rss_kib
