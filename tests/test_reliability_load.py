"""Load and soak, reduced from bench/bench_load.py: every trial accounted for, resources flat."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlante_eval._util.fstree import OPEN_DIRS
from atlante_eval.trial import process as process_module
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
    """150 stand-in trials at --jobs 32: all pass, descriptors bounded by --jobs, nothing left.

    Only correctness is asserted; how fast the run goes (and so how many resource
    samples it yields, or how they trend over time) belongs to bench/bench_load.py.
    """
    result = load_run(tmp_path, trials=TRIALS, jobs=JOBS)
    assert result.status == 0
    assert result.trials == TRIALS
    assert result.verdicts == {"pass": TRIALS}
    assert result.leftover_dirs == []
    assert result.leftover_processes == []
    fds = result.samples.fds
    assert fds, "the run was sampled at least once"
    assert max(fds) <= FD_BOUND, (max(fds), FD_BOUND)


@pytest.mark.slow
def test_repeated_runs_in_one_process_leak_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_eval repeated in one process: open descriptors identical, memory flat after warm-up.

    A fixed number of runs (``seconds=0``: the three-run minimum), never a duration.
    """
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    result = soak(tmp_path, seconds=0, trials=20, jobs=16)
    assert result.runs == 3
    assert result.trials == 20 * result.runs
    assert len(set(result.fds[1:])) == 1, result.fds
    assert result.rss_kib[-1] - result.rss_kib[1] < 8 * 1024, result.rss_kib
