"""How well the trial engine overlaps model latency, and what a trial costs it.

Two measurements, each printed as ratios taken in the same run on the same machine:

(a) **Concurrency.** 48 trials of a stand-in host that spends 2 s per session
    (a shell process that sleeps, as a host waits for its model, then makes the
    agent's change and prints a usage event) at ``--jobs 16`` against the ideal
    ``ceil(48 / 16) * 2 s = 6 s`` (median of three runs), and against the same
    plan at ``--jobs 1``. Targets: within 1.3x of the ideal, and at least 10x
    faster than one job.

(b) **Per-trial overhead.** An instant host (no process; it writes one file into
    the sandbox) on a small fixture, run sequentially, against a shell script
    that does the bare minimum of the same work per trial: copy the fixture,
    ``git init`` / ``add`` / ``commit``, write a file, ``git add`` + ``git diff``,
    remove the copy. The engine does more (native outputs, host preparation, a
    private baseline copy, hardened git, changed paths and capped diff, checks,
    cleanup); the target is within 2x of the script.

Run from the repository root: ``python -m bench engine``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from atlante_eval import SessionEnd, SessionUsage, TrialContext, run_eval
from atlante_eval.hosts.base import run_json_stream

#: Trials in the concurrency benchmark.
TRIALS = 48
#: Concurrent trials in the parallel run.
JOBS = 16
#: Seconds each stand-in session spends "waiting for the model".
LATENCY_S = 2.0
#: Runs of the parallel plan (the median is reported; one --jobs 1 run takes ~100 s).
PARALLEL_RUNS = 3
#: Trials in the overhead benchmark.
OVERHEAD_TRIALS = 40
#: Repetitions of the overhead measurement (the median is reported).
REPETITIONS = 5

_SCHEMA = "https://atlante.sh/schema/v0.1/schema.json"
_SCENARIO_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
#: The stand-in session: wait (the model), make the agent's one change, report usage.
#: A shell script, so that the host's own start-up cost stays small next to the
#: engine's (a real host costs far more, and would only hide the engine's share).
_SESSION = (
    'sleep "$1"\n'
    "printf 'export const ok = true;\\n' > src/health.ts\n"
    'printf \'%s\\n\' \'{"type": "step_finish", "part": {"tokens": {"total": 100}}}\'\n'
)


class SleepingHost:
    """A host whose session is a real process (a shell) that sleeps, then reports usage."""

    name = "bench-sleeper"
    version: str | None = None
    ignored_changes: Sequence[str] = ()

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    async def probe(self) -> None:
        """Nothing to probe."""

    def prepare(self, context: TrialContext) -> None:
        """Nothing to prepare."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Run the sleeping session and count its usage."""

        def on_event(event: dict[str, Any]) -> None:
            part = event.get("part")
            if isinstance(part, dict):
                usage.observe_tokens(int(part["tokens"]["total"]))

        result = await run_json_stream(
            ["sh", "-c", _SESSION, "session", str(self.latency_s)],
            cwd=context.sandbox,
            env={"PATH": os.environ.get("PATH", "")},
            on_event=on_event,
        )
        return SessionEnd(error=None if result.returncode == 0 else "session failed")


class InstantHost:
    """A host whose session writes one file in-process and returns."""

    name = "bench-instant"
    version: str | None = None
    ignored_changes: Sequence[str] = ()

    async def probe(self) -> None:
        """Nothing to probe."""

    def prepare(self, context: TrialContext) -> None:
        """Nothing to prepare."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Write the agent's one change."""
        (context.sandbox / "src" / "health.ts").write_text("export const ok = true;\n")
        usage.observe_tokens(100)
        return SessionEnd()


def _write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def make_project(root: Path, *, trials: int, max_sessions: int) -> Path:
    """A one-scenario project with a small fixture and verified native outputs."""
    _write(
        root / "atlante.jsonc",
        {
            "$schema": _SCHEMA,
            "hosts": ["opencode"],
            "eval": {
                "host": "opencode",
                "scenarios": "eval/scenarios/*.eval.json",
                "budget": {"trials": trials, "maxSessions": max_sessions},
            },
        },
    )
    fixture = root / "eval" / "fixtures" / "app"
    for rel, text in {
        "README.md": "# app\n",
        "package.json": '{"name": "app"}\n',
        "src/routes.ts": "export const routes = [];\n",
        "src/index.ts": "import { routes } from './routes';\n",
        "test/routes.test.ts": "test('routes', () => {});\n",
    }.items():
        (fixture / rel).parent.mkdir(parents=True, exist_ok=True)
        (fixture / rel).write_text(text, encoding="utf-8")
    _write(
        root / "eval" / "scenarios" / "bench.eval.json",
        {
            "$schema": _SCENARIO_URI,
            "version": "0.1",
            "name": "bench",
            "task": {"fixture": "eval/fixtures/app", "prompt": "Add a health flag."},
            "checks": [
                {"type": "file-exists", "path": "src/health.ts"},
                {"type": "file-unchanged", "path": "README.md"},
                {"type": "diff-allowlist", "allow": ["src/health.ts"]},
            ],
        },
    )
    agent = b'---\ndescription: "reviewer"\n---\nYou review code.\n'
    (root / ".opencode" / "agents").mkdir(parents=True)
    (root / ".opencode" / "agents" / "reviewer.md").write_bytes(agent)
    _write(
        root / ".atlante" / "opencode-native.json",
        {
            "format": "atlante-opencode-native",
            "version": 1,
            "files": [
                {
                    "kind": "agent",
                    "id": "reviewer",
                    "path": ".opencode/agents/reviewer.md",
                    "sha256": hashlib.sha256(agent).hexdigest(),
                }
            ],
        },
    )
    return root


async def _timed_run(project: Path, host: object, *, jobs: int) -> float:
    started = time.perf_counter()
    report = await run_eval(project, host=host, jobs=jobs, out=project / "reports")  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    verdicts = {t.verdict for t in report.all_trials()}
    if verdicts != {"pass"}:
        raise RuntimeError(f"benchmark trials did not all pass: {sorted(verdicts)}")
    return elapsed


def concurrency(workdir: Path) -> dict[str, float]:
    """Time 48 sleeping trials at --jobs 16 and at --jobs 1."""
    project = make_project(workdir / "concurrency", trials=TRIALS, max_sessions=TRIALS)
    host = SleepingHost(LATENCY_S)
    parallel = statistics.median(
        anyio.run(lambda: _timed_run(project, host, jobs=JOBS)) for _ in range(PARALLEL_RUNS)
    )
    sequential = anyio.run(lambda: _timed_run(project, host, jobs=1))
    ideal = math.ceil(TRIALS / JOBS) * LATENCY_S
    return {"parallel_s": parallel, "sequential_s": sequential, "ideal_s": ideal}


_SHELL = r"""
set -eu
fixture="$1"; work="$2"; count="$3"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
for i in $(seq "$count"); do
  d="$work/t$i"
  mkdir -p "$d"
  cp -r "$fixture" "$d/project"
  cd "$d/project"
  git init -q
  git add --all --force
  git -c user.name=b -c user.email=b@b commit -q -m baseline
  echo 'export const ok = true;' > src/health.ts
  git add --all --force
  git diff --cached HEAD > /dev/null
  cd "$work"
  rm -rf "$d"
done
"""


def _shell_per_trial(fixture: Path, workdir: Path, count: int) -> float:
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    subprocess.run(
        ["bash", "-c", _SHELL, "bench", str(fixture), str(workdir), str(count)], check=True
    )
    return (time.perf_counter() - started) / count


def _engine_per_trial(workdir: Path, count: int) -> float:
    """Per-trial engine time: (run of N trials - run of 1 trial) / (N - 1)."""
    many = make_project(workdir / f"many-{count}", trials=count, max_sessions=count)
    one = make_project(workdir / "one", trials=1, max_sessions=1)
    host = InstantHost()
    full = anyio.run(lambda: _timed_run(many, host, jobs=1))
    base = anyio.run(lambda: _timed_run(one, host, jobs=1))
    return (full - base) / (count - 1)


def overhead(workdir: Path) -> dict[str, float]:
    """Per-trial time of the engine (instant host) and of the shell script.

    Both are measured alternately, REPETITIONS times; the ratio reported is the
    median of the per-repetition ratios, which resists load from other programs.
    """
    engine_times = []
    shell_times = []
    ratios = []
    for repetition in range(REPETITIONS):
        target = workdir / f"overhead-{repetition}"
        engine = _engine_per_trial(target, OVERHEAD_TRIALS)
        fixture = target / "one" / "eval" / "fixtures" / "app"
        shell = _shell_per_trial(fixture, target / "shell", OVERHEAD_TRIALS)
        engine_times.append(engine)
        shell_times.append(shell)
        ratios.append(engine / shell)
    return {
        "engine_ms": statistics.median(engine_times) * 1000,
        "shell_ms": statistics.median(shell_times) * 1000,
        "ratio": statistics.median(ratios),
    }


def machine() -> str:
    """A one-line description of the machine the figures come from."""
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.system()} {platform.release()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {git}, "
        f"load average {load:.1f} at start"
    )


def main() -> None:
    """Run both benchmarks and print their ratios."""
    print(machine())
    workdir = Path(tempfile.mkdtemp(prefix="atlante-bench-engine-"))
    try:
        cost = overhead(workdir)
        ratio = cost["ratio"]
        print(
            f"(b) per-trial overhead: engine {cost['engine_ms']:.1f} ms, "
            f"shell script {cost['shell_ms']:.1f} ms -> {ratio:.2f}x the script "
            f"(target <= 2x: {'met' if ratio <= 2 else 'MISSED'})"
        )
        timing = concurrency(workdir)
        vs_ideal = timing["parallel_s"] / timing["ideal_s"]
        speedup = timing["sequential_s"] / timing["parallel_s"]
        print(
            f"(a) {TRIALS} trials x {LATENCY_S:.0f} s: --jobs {JOBS} {timing['parallel_s']:.2f} s, "
            f"ideal {timing['ideal_s']:.1f} s -> {vs_ideal:.2f}x ideal "
            f"(target <= 1.3x: {'met' if vs_ideal <= 1.3 else 'MISSED'}); "
            f"--jobs 1 {timing['sequential_s']:.1f} s -> {speedup:.1f}x faster "
            f"(target >= 10x: {'met' if speedup >= 10 else 'MISSED'})"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
