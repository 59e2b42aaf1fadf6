"""Comparing with a large baseline: every statistic recomputed from the trials, in linear time.

A baseline of N trials in one scenario, written without ``stats`` (the reference
tool's shape, so everything is computed from the trials), is compared with a
HEAD of 20 trials and with a HEAD of N trials, through
:func:`atlante_eval.report.compare.compare_report_files` (read, check, compare).
Printed: the median wall time of three runs for each N, and the ratio between
consecutive N (linear time doubles when N doubles). The same statistics the old
way (pass@k and pass^k for every k with exact integers, Fisher's test with exact
integers at every size) are timed for the smaller N, where they still finish.

Run from the repository root: ``python -m bench compare``.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from atlante_eval import Meta, RunReport, TrialResult
from atlante_eval.report import MetaConfig, finalize, summarize
from atlante_eval.report.compare import compare_report_files
from atlante_eval.stats import proportions

SIZES = (2_500, 5_000, 10_000, 20_000)
OLD_SIZES = (500, 1_000, 2_000)


def _report(passed: int, total: int) -> RunReport:
    trials = [
        TrialResult(i=i, verdict="pass" if i < passed else "fail", duration_ms=1000)
        for i in range(total)
    ]
    config = MetaConfig(
        trials=total,
        timeout_ms=600_000,
        max_sessions=total,
        max_tokens=400_000,
        setup_timeout_ms=300_000,
        check_timeout_default_ms=120_000,
    )
    meta = Meta(atlante="0", host="opencode", model="m", model_version="m", config=config)
    return finalize(RunReport(run_id="bench", meta=meta, scenarios={"s": summarize(trials)}))


def _write(path: Path, report: RunReport, *, stats: bool) -> Path:
    document = json.loads(report.to_json())
    if not stats:
        for result in document["scenarios"].values():
            result.pop("stats", None)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _median(run: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _old_statistics(n: int) -> None:
    """What a comparison computed before: exact integers for every k and for Fisher."""
    c = n * 3 // 5
    for k in range(1, n + 1):
        1.0 - math.comb(n - c, k) / math.comb(n, k)
        math.comb(c, k) / math.comb(n, k)
    original = proportions._FISHER_EXACT_TRIALS
    proportions._FISHER_EXACT_TRIALS = 10**9
    try:
        proportions.fisher_exact_two_sided(c, n, n // 2, n)
    finally:
        proportions._FISHER_EXACT_TRIALS = original


def main() -> None:
    """Print the compare times per baseline size, then the old statistics' times."""
    with tempfile.TemporaryDirectory(prefix="atlante-bench-compare-") as scratch:
        root = Path(scratch)
        previous: float | None = None
        for n in SIZES:
            base = _write(root / f"base-{n}.json", _report(n * 3 // 5, n), stats=False)
            small = _write(root / "head-20.json", _report(10, 20), stats=True)
            large = _write(root / f"head-{n}.json", _report(n // 2, n), stats=True)
            against_small = _median(lambda b=base, h=small: compare_report_files(b, h))
            against_large = _median(lambda b=base, h=large: compare_report_files(b, h))
            ratio = f"  x{against_large / previous:.2f} for x2 trials" if previous else ""
            print(
                f"baseline {n:>6} trials: vs 20 trials {against_small * 1000:7.1f} ms, "
                f"vs {n} trials {against_large * 1000:7.1f} ms{ratio}"
            )
            previous = against_large
    for n in OLD_SIZES:
        took = _median(lambda n=n: _old_statistics(n))
        print(f"old exact statistics, {n:>5} trials a side: {took:.2f} s")
