"""What ``--isolation os`` costs a trial, as ratios to ``--isolation none`` in one run.

(a) **The engine benchmark** (:mod:`bench.bench_engine` (a)): 48 trials of a
    stand-in host that spends 2 s per session (as a host waits for its model) at
    ``--jobs 16``, plus a command check per trial; wall time per trial under
    ``os`` against ``none``, alternating, median of three runs each. Target:
    under 1.2x.

(b) **The fixed cost, without model latency**: a sequential run of the same
    suite with a session that does not wait, so each trial's two confined
    process trees (the session, with the filtering proxy and the in-sandbox
    forwarder, and the command check, without network) stand next to the
    engine's own work alone (fixture copy, git baseline, diff, checks,
    cleanup). Per-trial time is ``(run of N - run of 1) / (N - 1)``, both modes
    alternately, REPETITIONS times, median of the per-repetition ratios. No
    target: it shows the milliseconds isolation adds to each trial, which a
    real session (seconds of model latency) hides.

(c) **The per-trial limits' share of (b)**: the same measurement, ``os`` (with
    its default limits: a control group per trial that every process joins
    through ``/bin/sh``, and the tmpfs handshake with bubblewrap) against ``os``
    with every limit turned off. No target.

Run from the repository root: ``python -m bench isolation``.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from atlante_eval import run_eval
from atlante_eval.isolation.preflight import require_os_isolation
from bench.bench_engine import SleepingHost, machine, make_project

#: Trials in the long run of each measurement.
TRIALS = 20
#: Repetitions per mode (the median ratio is reported).
REPETITIONS = 5
#: Trials, concurrency and session latency of the engine benchmark (as bench_engine (a)).
LATENCY_TRIALS, LATENCY_JOBS, LATENCY_S = 48, 16, 2.0
#: Runs of the engine benchmark per mode (the median is reported).
LATENCY_RUNS = 3
#: The command check every trial runs (a real process, confined under ``os``).
_CHECK = {"type": "command", "run": ["sh", "-c", "test -f src/health.ts"]}
#: The modes measured: the isolation asked for and the limits over its defaults.
_MODES: dict[str, tuple[str, dict[str, str] | None]] = {
    "none": ("none", None),
    "os": ("os", None),
    "os-no-limits": ("os", dict.fromkeys(("memoryMb", "pids", "cpus", "tmpMb"), "unlimited")),
}


def _project(root: Path, trials: int) -> Path:
    project = make_project(root, trials=trials, max_sessions=trials)
    path = project / "eval" / "scenarios" / "bench.eval.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["checks"].append(_CHECK)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return project


async def _timed(project: Path, mode: str, *, latency_s: float = 0.0, jobs: int = 1) -> float:
    isolation, limits = _MODES[mode]
    started = time.perf_counter()
    report = await run_eval(
        project,
        host=SleepingHost(latency_s),
        jobs=jobs,
        out=project / "reports",
        isolation=isolation,
        limits=limits,
    )
    elapsed = time.perf_counter() - started
    verdicts = {t.verdict for t in report.all_trials()}
    if verdicts != {"pass"}:
        raise RuntimeError(f"{mode}: benchmark trials did not all pass: {sorted(verdicts)}")
    return elapsed


def _per_trial(workdir: Path, isolation: str) -> float:
    many = _project(workdir / f"{isolation}-many", TRIALS)
    one = _project(workdir / f"{isolation}-one", 1)
    full = anyio.run(lambda: _timed(many, isolation))
    base = anyio.run(lambda: _timed(one, isolation))
    return (full - base) / (TRIALS - 1)


def measure(workdir: Path, base: str = "none", other: str = "os") -> dict[str, float]:
    """Per-trial time of two modes, alternating, and the median ratio."""
    plain, confined, ratios = [], [], []
    for repetition in range(REPETITIONS):
        target = workdir / f"{base}-{other}-rep-{repetition}"
        order = (base, other) if repetition % 2 == 0 else (other, base)
        times = {mode: _per_trial(target, mode) for mode in order}
        plain.append(times[base])
        confined.append(times[other])
        ratios.append(times[other] / times[base])
    return {
        "base_ms": statistics.median(plain) * 1000,
        "other_ms": statistics.median(confined) * 1000,
        "ratio": statistics.median(ratios),
    }


def engine_benchmark(workdir: Path) -> dict[str, float]:
    """Wall time per trial of the latency-bound engine benchmark, none vs os."""
    project = _project(workdir / "latency", LATENCY_TRIALS)
    runs: dict[str, list[float]] = {"none": [], "os": []}
    for repetition in range(LATENCY_RUNS):
        for mode in ("none", "os") if repetition % 2 == 0 else ("os", "none"):
            elapsed = anyio.run(
                lambda mode=mode: _timed(project, mode, latency_s=LATENCY_S, jobs=LATENCY_JOBS)
            )
            runs[mode].append(elapsed / LATENCY_TRIALS)
    plain, confined = statistics.median(runs["none"]), statistics.median(runs["os"])
    return {"none_ms": plain * 1000, "os_ms": confined * 1000, "ratio": confined / plain}


def main() -> None:
    """Measure and print the per-trial cost of OS isolation."""
    print(machine())
    require_os_isolation()
    workdir = Path(tempfile.mkdtemp(prefix="atlante-bench-isolation-"))
    try:
        bench = engine_benchmark(workdir)
        ratio = bench["ratio"]
        print(
            f"(a) engine benchmark ({LATENCY_TRIALS} trials x {LATENCY_S:.0f} s, --jobs "
            f"{LATENCY_JOBS}): per trial none {bench['none_ms']:.1f} ms, os "
            f"{bench['os_ms']:.1f} ms -> {ratio:.2f}x "
            f"(target < 1.2x: {'met' if ratio < 1.2 else 'MISSED'})"
        )
        cost = measure(workdir)
        print(
            f"(b) no model latency, sequential: per trial none {cost['base_ms']:.1f} ms, os "
            f"{cost['other_ms']:.1f} ms -> {cost['ratio']:.2f}x, "
            f"+{cost['other_ms'] - cost['base_ms']:.1f} ms per trial"
        )
        limits = measure(workdir, "os-no-limits", "os")
        print(
            f"(c) the default limits, no model latency: per trial os without limits "
            f"{limits['base_ms']:.1f} ms, os {limits['other_ms']:.1f} ms -> "
            f"{limits['ratio']:.2f}x, +{limits['other_ms'] - limits['base_ms']:.1f} ms per trial"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
