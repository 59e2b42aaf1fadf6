"""Load and soak: many stand-in trials at high concurrency, with resources flat.

Two measurements, each printed with the figures they rest on:

(a) **Load.** 500 trials of the stand-in host (``tests/standin_host.py``: a real
    Python process per session that writes a file, reports usage and exits) at
    ``--jobs 32``, through the real CLI in a subprocess, on however many cores the
    machine has. While it runs, the CLI's open file descriptors
    (``/proc/<pid>/fd``) and resident memory are sampled. Targets: every trial
    accounted for in the report (all ``pass``); descriptors and memory flat (the
    second half of the run peaks no higher than the first, within a small
    tolerance); no ``atlante-eval-*`` temporary directory and no process left.

(b) **Soak.** ``run_eval`` repeated in one process for a few minutes; descriptors
    and memory after each run. Target: no growth between the first runs and the
    last.

Run from the repository root: ``python -m bench load``. ``tests/test_reliability_load.py``
runs a reduced size of both in the default test run.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from factory import make_project, scenario  # noqa: E402 - tests/ is put on the path above
from standin import StandinHost, actions  # noqa: E402

from atlante_eval import RunReport, run_eval  # noqa: E402

ENTRY = TESTS / "standin_cli.py"
#: Trials in the full load run (10 scenarios of 50 trials).
TRIALS = 500
#: Concurrent host sessions.
JOBS = 32
#: Seconds the full soak runs.
SOAK_S = 180.0
#: How often the CLI's descriptors and memory are sampled.
SAMPLE_S = 0.1
#: Each session's stand-in "model latency".
LATENCY_S = 0.05


@dataclass
class Samples:
    """Open descriptors and resident memory (KiB) of a process over time."""

    fds: list[int] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)

    def halves(self, values: list[int]) -> tuple[int, int]:
        """Peak of the first half and of the second half of ``values``."""
        middle = max(1, len(values) // 2)
        return max(values[:middle]), max(values[middle:] or values[:middle])


@dataclass
class LoadResult:
    """What one load run showed."""

    trials: int
    verdicts: dict[str, int]
    wall_s: float
    samples: Samples
    leftover_dirs: list[str]
    leftover_processes: list[str]
    status: int


def load_project(root: Path, trials: int) -> Path:
    """A project with ``trials`` stand-in trials (scenarios of up to 50 trials each)."""
    per = min(50, trials)
    count = -(-trials // per)
    prompt = actions(
        {"sleep": LATENCY_S}, {"write": "x.txt", "content": "done\n"}, {"usage": 10, "cost": 0.001}
    )
    checks = [
        {"type": "file-contains", "path": "x.txt", "pattern": "done"},
        {"type": "diff-allowlist", "allow": ["x.txt"]},
    ]
    return make_project(
        root,
        scenarios=[scenario(f"load-{n:02d}", prompt=prompt, checks=checks) for n in range(count)],
        eval_extra={"budget": {"trials": per, "maxSessions": trials, "timeoutMs": 120_000}},
    )


def _sample(pid: int, samples: Samples, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        rss = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
        samples.fds.append(fds)
        samples.rss_kib.append(rss)
        stop.wait(SAMPLE_S)


def _processes_with(marker: bytes) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def load_run(workdir: Path, *, trials: int = TRIALS, jobs: int = JOBS) -> LoadResult:
    """Run ``trials`` stand-in trials at ``jobs`` through the CLI and sample its resources."""
    project = load_project(workdir / "project", trials)
    tmpdir = workdir / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({"TMPDIR": str(tmpdir), "NO_COLOR": "1"})
    samples = Samples()
    stop = threading.Event()
    started = time.monotonic()
    with open(workdir / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(ENTRY), "run", str(project), "--jobs", str(jobs), "--json"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        sampler = threading.Thread(target=_sample, args=(process.pid, samples, stop))
        sampler.start()
        stdout, _ = process.communicate(timeout=1800)
        stop.set()
        sampler.join()
    wall = time.monotonic() - started
    report = RunReport.model_validate_json(stdout)
    verdicts: dict[str, int] = {}
    for trial in report.all_trials():
        verdicts[trial.verdict] = verdicts.get(trial.verdict, 0) + 1
    return LoadResult(
        trials=len(report.all_trials()),
        verdicts=verdicts,
        wall_s=wall,
        samples=samples,
        leftover_dirs=sorted(p.name for p in tmpdir.iterdir()),
        leftover_processes=_processes_with(f"TMPDIR={tmpdir}".encode()),
        status=process.returncode,
    )


def _own_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _own_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class SoakResult:
    """Descriptors and memory of this process after each of a series of runs."""

    runs: int
    trials: int
    fds: list[int]
    rss_kib: list[int]


def soak(workdir: Path, *, seconds: float = SOAK_S, trials: int = 40, jobs: int = 16) -> SoakResult:
    """Repeat ``run_eval`` in this process for ``seconds``; record fds and RSS after each."""
    project = load_project(workdir / "soak-project", trials)
    out = workdir / "soak-reports"
    fds: list[int] = []
    rss: list[int] = []
    total = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or len(fds) < 3:
        report = anyio.run(lambda: run_eval(project, host=StandinHost(), jobs=jobs, out=out))
        total += len(report.all_trials())
        gc.collect()
        fds.append(_own_fds())
        rss.append(_own_rss_kib())
    return SoakResult(runs=len(fds), trials=total, fds=fds, rss_kib=rss)


def main() -> None:
    """Run the full load and soak measurements and print their figures."""
    with tempfile.TemporaryDirectory(prefix="bench-load-") as raw:
        workdir = Path(raw)
        result = load_run(workdir)
        fd_first, fd_second = result.samples.halves(result.samples.fds)
        rss_first, rss_second = result.samples.halves(result.samples.rss_kib)
        print(
            json.dumps(
                {
                    "load": {
                        "trials": result.trials,
                        "jobs": JOBS,
                        "cores": os.cpu_count(),
                        "verdicts": result.verdicts,
                        "wall_s": round(result.wall_s, 1),
                        "trials_per_s": round(result.trials / result.wall_s, 1),
                        "fds_peak_first_half": fd_first,
                        "fds_peak_second_half": fd_second,
                        "rss_mib_peak_first_half": round(rss_first / 1024, 1),
                        "rss_mib_peak_second_half": round(rss_second / 1024, 1),
                        "rss_mib_median": round(
                            statistics.median(result.samples.rss_kib) / 1024, 1
                        ),
                        "leftover_dirs": result.leftover_dirs,
                        "leftover_processes": len(result.leftover_processes),
                        "exit_status": result.status,
                    }
                },
                indent=2,
            )
        )
        soaked = soak(workdir)
        print(
            json.dumps(
                {
                    "soak": {
                        "seconds": SOAK_S,
                        "runs": soaked.runs,
                        "trials": soaked.trials,
                        "fds_after_first_runs": soaked.fds[:3],
                        "fds_after_last_runs": soaked.fds[-3:],
                        "rss_mib_after_run_3": round(soaked.rss_kib[2] / 1024, 1),
                        "rss_mib_after_last_run": round(soaked.rss_kib[-1] / 1024, 1),
                    }
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
