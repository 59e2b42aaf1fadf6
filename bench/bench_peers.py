"""Side by side with Inspect AI: the shared benchmark in ``../shared/peerbench``, and the targets.

``peerbench/run.sh`` runs atlante-eval (this checkout's console script) and
Inspect AI on the same workload in one run, interleaved: the same seven-file
sandbox, the same stand-in agent, the same three checks, both through their
command lines, and two bash scripts as the floor (see its ``peerbench.py``).
This module runs it, prints its tables, then each figure issue 32 sets a target
for, as the ratio or the value the benchmark measured in that one run:

- per trial, 50 instant trials, sequential: ≤ 1.15x bash (the bare script,
  ``bench_engine``'s) and ≤ 0.70x Inspect's, in the same repetitions;
- per trial at 4 concurrent: ≤ 1.30x bash;
- 48 trials x 2 s at 16 concurrent, the whole CLI's wall: ≤ 1.20x the ideal 6 s;
- launch to the first trial's agent ≤ 300 ms, ``--help`` ≤ 120 ms;
- peak RSS of the 48-trial run ≤ 60 MiB;
- processes started per trial ≤ 9 (the count before the grading rebuild).

Before the run, the package's bytecode is compiled (``compileall``), as installing
it does: with ``PYTHONDONTWRITEBYTECODE`` set, an editable checkout would
otherwise recompile every module changed since its last cache on each launch.
After it, the conditions are printed with the targets: the load average and what
creating a directory costs under ``PB_TMP`` (the trials' scratch), the largest
per-trial cost on a disk whose inode allocator skips recently deleted inodes
(docs/performance.md, "Round 4").

Environment: ``PEERBENCH_DIR`` (default ``../shared/peerbench`` next to the
checkout), ``PEERBENCH_ARGS`` (default ``--quick``; ``--reps 5 --overhead-reps 9``
is the issue's full run, about 13 minutes idle), ``PB_TMP`` (scratch; default
``<tmp>/pb-<user>``). Inspect AI installs into ``$PB_TMP/inspect-venv`` on first
use (``PB_INSPECT_VERSION``, default 0.3.285). When the directory is missing the
benchmark says so and is skipped. Run from the repository root:
``python -m bench peers`` (``nox -s bench -- peers``).
"""

from __future__ import annotations

import compileall
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Issue 32's targets: (figure, how it is read from results.json, bound, unit).
Target = tuple[str, Callable[[dict], float | None], float, str]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _overhead(jobs: str, versus: str) -> Callable[[dict], float | None]:
    def figure(res: dict) -> float | None:
        rows = res.get("overhead", {}).get(jobs)
        if not rows:
            return None
        pairs = zip(rows["atlante-eval"], rows[versus], strict=False)
        return _median([a["per_trial_ms"] / b["per_trial_ms"] for a, b in pairs])

    return figure


def _concurrency(res: dict, key: str) -> float | None:
    rows = res.get("concurrency", {}).get("runs", {}).get("atlante-eval")
    if not rows:
        return None
    if key == "wall":
        return _median([r["wall"] / res["concurrency"]["ideal_s"] for r in rows])
    return _median([r[key] for r in rows])


def _startup(name: str) -> Callable[[dict], float | None]:
    def figure(res: dict) -> float | None:
        values = res.get("startup", {}).get(name)
        return _median([v * 1000 for v in values]) if values else None

    return figure


def _processes(res: dict) -> float | None:
    census = res.get("census", {}).get("atlante-eval", {})
    value = census.get("execs_per_trial")
    return float(value) if value is not None else None


TARGETS: tuple[Target, ...] = (
    ("per trial, sequential ÷ bash (bare)", _overhead("1", "shell-bare"), 1.15, "x"),
    ("per trial, sequential ÷ Inspect", _overhead("1", "inspect"), 0.70, "x"),
    ("per trial, 4 concurrent ÷ bash (bare)", _overhead("4", "shell-bare"), 1.30, "x"),
    ("48 x 2 s at 16 concurrent ÷ ideal", lambda r: _concurrency(r, "wall"), 1.20, "x"),
    ("launch → first agent", _startup("atlante-eval: launch to first trial's agent"), 300, " ms"),
    ("--help", _startup("atlante-eval --help"), 120, " ms"),
    ("peak RSS, 48-trial run", lambda r: _concurrency(r, "rss_mib"), 60, " MiB"),
    ("processes per trial", _processes, 9, ""),
)


def targets_table(res: dict) -> str:
    """The issue's targets against one results.json, as a Markdown table."""
    lines = ["| Figure | Measured | Target | Met |", "| --- | --- | --- | --- |"]
    for name, read, bound, unit in TARGETS:
        value = read(res)
        if value is None:
            lines.append(f"| {name} | not measured | ≤ {bound:g}{unit} | |")
            continue
        lines.append(
            f"| {name} | {value:.2f}{unit} | ≤ {bound:g}{unit} "
            f"| {'yes' if value <= bound else 'no'} |"
        )
    return "\n".join(lines)


def mkdir_cost_us(where: Path, count: int = 200) -> float:
    """Median microseconds to create one of ``count`` new directories under ``where``.

    None is removed before all are made: a directory removed in the same second
    would give its inode straight back to the next one.
    """
    probe = Path(tempfile.mkdtemp(prefix="mkdir-probe-", dir=where))
    costs = []
    try:
        for i in range(count):
            started = time.perf_counter()
            (probe / str(i)).mkdir()
            costs.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(probe)
    return statistics.median(costs) * 1e6


def main() -> None:
    """Run the shared side-by-side benchmark and print the targets it decides."""
    default = ROOT.parent / "shared" / "peerbench"
    peerbench = Path(os.environ.get("PEERBENCH_DIR", default))
    script = peerbench / "run.sh"
    if not script.is_file():
        print(f"skipped: no side-by-side benchmark at {peerbench} (set PEERBENCH_DIR)")
        return
    user = os.environ.get("USER", str(os.getuid()))
    scratch = Path(os.environ.get("PB_TMP", Path(tempfile.gettempdir()) / f"pb-{user}"))
    console = Path(sys.executable).parent / "atlante-eval"
    env = {
        **os.environ,
        "PB_TMP": str(scratch),
        "PB_INSPECT_VERSION": os.environ.get("PB_INSPECT_VERSION", "0.3.285"),
        "ATLANTE_EVAL": os.environ.get("ATLANTE_EVAL", str(console)),
    }
    args = shlex.split(os.environ.get("PEERBENCH_ARGS", "--quick"))
    compileall.compile_dir(ROOT / "atlante_eval", quiet=1)  # as an install would
    subprocess.run(["bash", str(script), *args], cwd=ROOT, env=env, check=True)
    results = Path(os.environ.get("PB_RESULTS", scratch / "results.json"))
    res = json.loads(results.read_text(encoding="utf-8"))
    load = res.get("load_average", {})
    mkdir_us = mkdir_cost_us(scratch)
    print(
        f"\nIssue 32's targets (load average median {load.get('median', float('nan')):.1f}; "
        f"creating a directory in {scratch}: {mkdir_us:.0f} µs, median of 200):\n"
    )
    print(targets_table(res))


if __name__ == "__main__":
    main()
