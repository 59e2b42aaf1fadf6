"""Trials' directories spread apart by the file system, or not: the cost of their inodes.

Each "trial" creates a tree shaped like a sandbox's (a trial directory with 20
directories and 40 small files below it, 61 inodes) under a run root, and
removes it a few trials later, as the engine does with several jobs. The same
number of trials runs under a root marked as the top of directory hierarchies
(``atlante_eval._util.spread``, what ``create_run_root`` does) and under an
unmarked one, alternately, in the directory ``TMPDIR`` names (where a run's
sandboxes go). On ext4 without a journal, where every new inode walks past the
inodes freed in the last minute of its block group, the marked root is the
faster; a file system that keeps no inode flags (tmpfs) prints ``nan``.
Prints the median ratio marked ÷ unmarked. The unmarked rounds leave thousands
of freshly freed inodes behind them: run it apart from other benchmarks on the
same disk.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from atlante_eval._util.spread import spread_subdirectories

TRIALS = 200
ROUNDS = 2
#: Trials alive at once (as with ``--jobs``): each tree is removed this many trials later.
ALIVE = 8


def _trial(root: Path, index: int) -> None:
    trial = root / f"trial-{index}"
    trial.mkdir()
    for d in range(20):
        directory = trial / f"d{d}"
        directory.mkdir()
        for f in range(2):
            (directory / f"f{f}").write_bytes(b"x" * 64)


def _run(marked: bool) -> float:
    root = Path(tempfile.mkdtemp(prefix="bench-spread-"))
    try:
        if marked and not spread_subdirectories(root):
            return float("nan")
        started = time.perf_counter()
        for index in range(TRIALS):
            _trial(root, index)
            if index >= ALIVE:  # the engine removes a trial's tree once it is over
                shutil.rmtree(root / f"trial-{index - ALIVE}")
        return time.perf_counter() - started
    finally:
        shutil.rmtree(root)


def main() -> None:
    """Alternate marked and unmarked roots; print each and the median ratio."""
    where = tempfile.gettempdir()
    ratios = []
    for round_ in range(ROUNDS):
        order = (True, False) if round_ % 2 == 0 else (False, True)
        times = {marked: _run(marked) for marked in order}
        ratios.append(times[True] / times[False])
        print(
            f"round {round_ + 1}: marked {times[True] * 1000 / TRIALS:.2f} ms/trial, "
            f"unmarked {times[False] * 1000 / TRIALS:.2f} ms/trial"
        )
    fs = os.statvfs(where)
    print(
        f"{TRIALS} trials x 61 inodes in {where} (block size {fs.f_bsize}): "
        f"marked ÷ unmarked, median {statistics.median(ratios):.2f}x "
        "(nan: no inode flags here)"
    )


if __name__ == "__main__":
    main()
