"""Launch to first session: from ``atlante-eval run`` starting to the host's first exec.

A stand-in ``opencode`` executable (a shell script on PATH: it answers
``--version`` with a supported version and, for ``run``, appends the time it
started to a file, makes the agent's change and reports usage) is run through the
real command line, ``python -m atlante_eval run PROJECT --jobs 4``, on a project
of 4 one-trial scenarios. The figure is the time from just before the CLI process
is started to the first session's timestamp: interpreter start-up, imports,
configuration, plan, host probe, the first wave's sandbox assembly (fixture copy,
native outputs, host preparation, git baseline). The median of ``RUNS`` runs is
reported with ``python -c pass`` measured alongside (the interpreter's own share),
and the CPU time the CLI process had used by then (its own and its reaped
children's, read by the stand-in from ``/proc/<parent>/stat``), which does not
depend on the machine's load the way wall time does.

Run from the repository root: ``python -m bench launch``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: CLI runs measured (the median is reported).
RUNS = 9
#: Scenarios (one trial each) in the project; all start in the first wave.
SCENARIOS = 4
#: The target: launch to first session, in milliseconds.
TARGET_MS = 300.0

_SCRIPT = """#!/bin/sh
case "$1" in
  --version) echo 1.18.33; exit 0 ;;
  run)
    echo "$(date +%s.%N) $(cut -d')' -f2- /proc/$PPID/stat)" >> {stamps}
    printf 'export const ok = true;\\n' > src/health.ts
    printf '%s\\n' '{{"type": "step_finish", "part": {{"tokens": {{"total": 100}}}}}}'
    exit 0 ;;
esac
exit 0
"""


def _project(root: Path) -> Path:
    from .bench_engine import make_project

    project = make_project(root / "project", trials=1, max_sessions=SCENARIOS)
    source = project / "eval" / "scenarios" / "bench.eval.json"
    doc = json.loads(source.read_text(encoding="utf-8"))
    source.unlink()
    for i in range(SCENARIOS):
        doc["name"] = f"bench-{i}"
        (source.parent / f"bench-{i}.eval.json").write_text(json.dumps(doc), encoding="utf-8")
    return project


def _first(stamps: Path) -> tuple[float, float]:
    """Return the first session's start time and the CLI's CPU-ms (self + reaped children)."""
    lines = [line.split() for line in stamps.read_text().splitlines() if line.strip()]
    first = min(lines, key=lambda fields: float(fields[0]))
    # after "(comm)": state ppid ... fields 12-15 are utime stime cutime cstime (ticks)
    ticks = sum(int(first[i]) for i in (12, 13, 14, 15))
    return float(first[0]), ticks * 1000 / os.sysconf("SC_CLK_TCK")


def launch_ms(workdir: Path) -> tuple[list[float], list[float], list[float]]:
    """Return launch-to-first-session wall and CPU times, and bare-interpreter times (ms)."""
    project = _project(workdir)
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    stamps = workdir / "stamps.txt"
    host = bin_dir / "opencode"
    host.write_text(_SCRIPT.format(stamps=stamps), encoding="utf-8")
    host.chmod(0o755)
    data = workdir / "data"
    (data / "opencode").mkdir(parents=True)
    (data / "opencode" / "auth.json").write_text("{}", encoding="utf-8")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "XDG_DATA_HOME": str(data),
    }
    # An installed package runs from compiled bytecode; with this set (as in some
    # developer shells) every run would compile every module again (~70 ms of CPU),
    # which no user pays. The warm-up run writes the caches.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-m", "atlante_eval", "run", str(project), "--jobs", str(SCENARIOS)]
    argv += ["--out", str(workdir / "out")]
    launches: list[float] = []
    cpu: list[float] = []
    bare: list[float] = []
    for run in range(RUNS + 1):  # the first run warms the page cache and is not counted
        stamps.unlink(missing_ok=True)
        started = time.time()
        subprocess.run(argv, env=env, capture_output=True, check=False)
        first, cpu_ms = _first(stamps)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        if run:
            launches.append((first - started) * 1000)
            cpu.append(cpu_ms)
            bare.append((time.perf_counter() - began) * 1000)
    return launches, cpu, bare


def main() -> None:
    """Measure and print launch-to-first-session."""
    workdir = Path(tempfile.mkdtemp(prefix="atlante-bench-launch-"))
    try:
        launches, cpu, bare = launch_ms(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    median = statistics.median(launches)
    print(
        json.dumps(
            {
                "runs": RUNS,
                "launch_to_first_session_ms": round(median, 1),
                "min_ms": round(min(launches), 1),
                "cli_cpu_ms_at_first_session": round(statistics.median(cpu), 1),
                "python_-c_pass_ms": round(statistics.median(bare), 1),
                "load_average": round(os.getloadavg()[0], 1),
                "target": f"<= {TARGET_MS:.0f} ms: {'met' if median <= TARGET_MS else 'MISSED'}",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
