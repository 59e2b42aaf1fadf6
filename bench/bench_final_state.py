"""What storing each trial's final state costs, and what a regrade costs instead of a rerun.

One scenario, a fixture of about 3.3 MB (400 source-like text files and a 256 KiB
binary), a setup that compiles nothing but writes a 64 KiB file, and an instant
in-process host whose session writes three files (one of 200 KiB), deletes one
and commits. Measured in one run on the same machine, each figure printed with
its ratio:

(a) **Time per trial**: runs of N trials with the final state on and off
    (``final_state=False``), alternated, per trial = (N-trial run - 1-trial run)
    / (N - 1), wall time and CPU time (this process and its git children),
    median of the repetitions; and the CPU the recording itself takes per trial
    (thread time of ``record_prepared`` + ``record_final``), which the machine's
    load does not blur.
(b) **Disk**: the run directory's bytes with and without final states, per
    trial, and the store's bytes against the contents it holds (compression) and
    against the bytes the trials' states refer to (sharing across trials).
(c) **Regrade**: ``regrade_run`` of the N-trial run, per trial (wall and CPU,
    median of the repetitions), against the run's own per trial with an instant
    host (a real host's session costs seconds to minutes more, and model money,
    which a regrade saves entirely).

Run from the repository root: ``python -m bench final_state``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio

from atlante_eval import SessionEnd, SessionUsage, TrialContext, run_eval
from atlante_eval.run.regrade import regrade_run
from atlante_eval.trial.finalstate import TrialState

#: Trials per measured run.
TRIALS = 12
#: Alternating repetitions of the on/off measurement (the median is reported).
REPETITIONS = 3

_SCHEMA = "https://atlante.sh/schema/v0.1/schema.json"
_SCENARIO_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
_WORDS = ("const", "let", "return", "function", "import", "export", "from", "await", "value")


class EditingHost:
    """A host whose session edits the sandbox in-process: three writes, a delete, a commit."""

    name = "bench-editor"
    version: str | None = None
    ignored_changes: Sequence[str] = ()

    async def probe(self) -> None:
        """Nothing to probe."""

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        """Accept every name."""

    def prepare(self, context: TrialContext) -> None:
        """Nothing to prepare."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Make the agent's changes (one of them differs per trial) and commit them."""
        root = context.sandbox
        (root / "src" / "health.ts").write_text("export const ok = true;\n")
        (root / "src" / "report.txt").write_text(_text(200 * 1024, seed=context.trial))
        (root / "docs" / "notes.md").write_text(f"trial {context.trial}\n")
        (root / "src" / "file-0007.ts").unlink()
        for argv in (["add", "-A"], ["commit", "-qm", "agent"]):
            await anyio.run_process(
                ["git", "-c", "user.name=a", "-c", "user.email=a@b", *argv], cwd=root
            )
        usage.observe_tokens(100)
        return SessionEnd()


def _text(size: int, *, seed: int) -> str:
    rng = random.Random(seed)  # noqa: S311 - reproducible filler text
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size] + "\n"


def _write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def make_project(root: Path, *, trials: int) -> Path:
    """A one-scenario project: a 3.3 MB fixture, a setup that writes a file, native outputs."""
    _write(
        root / "atlante.jsonc",
        {
            "$schema": _SCHEMA,
            "hosts": ["opencode"],
            "eval": {
                "host": "opencode",
                "scenarios": "eval/scenarios/*.eval.json",
                "budget": {"trials": trials, "maxSessions": trials},
            },
        },
    )
    fixture = root / "eval" / "fixtures" / "app"
    for index in range(400):
        path = fixture / "src" / f"file-{index:04d}.ts"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_text(8 * 1024, seed=index))
    (fixture / "docs").mkdir()
    (fixture / "docs" / "README.md").write_text("# app\n")
    (fixture / "assets.bin").write_bytes(random.Random(1).randbytes(256 * 1024))  # noqa: S311
    setup = "open('generated.txt', 'w').write('x' * 65536)"
    _write(
        root / "eval" / "scenarios" / "bench.eval.json",
        {
            "$schema": _SCENARIO_URI,
            "version": "0.1",
            "name": "bench",
            "task": {
                "fixture": "eval/fixtures/app",
                "prompt": "Add a health flag.",
                "setup": ["python3", "-c", setup],
            },
            "checks": [
                {"type": "file-exists", "path": "src/health.ts"},
                {"type": "file-contains", "path": "src/health.ts", "pattern": "ok"},
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


def _size(path: Path) -> int:
    total = 0
    for current, _dirs, files in os.walk(path):
        for name in files:
            total += os.lstat(Path(current) / name).st_size
    return total


def _cpu() -> float:
    """CPU seconds used so far by this process and its waited-for children (git, setup)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _run(project: Path, *, trials: int, final_state: bool) -> tuple[float, Path]:
    started = time.perf_counter()
    report = await run_eval(
        project,
        host=EditingHost(),
        trials=trials,
        jobs=1,
        out=project / "reports",
        html=False,
        final_state=final_state,
    )
    elapsed = time.perf_counter() - started
    if {t.verdict for t in report.all_trials()} != {"pass"}:
        raise RuntimeError("benchmark trials did not all pass")
    return elapsed, project / "reports" / report.run_id


@contextlib.contextmanager
def _capture_clock() -> Iterator[list[float]]:
    """Time (thread CPU) each trial spends recording its final state, while in the block."""
    spent: list[float] = []
    originals = (TrialState.record_prepared, TrialState.record_final)

    def timed(method: Callable[..., None]) -> Callable[..., None]:
        def wrapper(*args: Any) -> None:
            started = time.thread_time()
            try:
                method(*args)
            finally:
                spent.append(time.thread_time() - started)

        return wrapper

    TrialState.record_prepared = timed(originals[0])  # type: ignore[method-assign]
    TrialState.record_final = timed(originals[1])  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        TrialState.record_prepared, TrialState.record_final = originals  # type: ignore[method-assign]


def per_trial(project: Path) -> dict[str, float]:
    """Per-trial wall and CPU time with and without final states, alternated (medians)."""
    figures: dict[str, list[float]] = {"on": [], "off": [], "on_cpu": [], "off_cpu": []}
    for _ in range(REPETITIONS):
        for final_state, key in ((True, "on"), (False, "off")):
            cpu = _cpu()
            many, _ = anyio.run(lambda f=final_state: _run(project, trials=TRIALS, final_state=f))
            many_cpu, cpu = _cpu() - cpu, _cpu()
            one, _ = anyio.run(lambda f=final_state: _run(project, trials=1, final_state=f))
            one_cpu = _cpu() - cpu
            figures[key].append((many - one) / (TRIALS - 1))
            figures[f"{key}_cpu"].append((many_cpu - one_cpu) / (TRIALS - 1))
    return {name: statistics.median(values) * 1000 for name, values in figures.items()}


def disk(project: Path) -> dict[str, Any]:
    """Run directory bytes with and without final states; the store against its contents."""
    _, with_state = anyio.run(lambda: _run(project, trials=TRIALS, final_state=True))
    _, without = anyio.run(lambda: _run(project, trials=TRIALS, final_state=False))
    report = json.loads((with_state / "report.json").read_text())
    refs = [t["finalState"] for t in report["scenarios"]["bench"]["trials"]]
    return {
        "run_dir": with_state,
        "with_bytes": _size(with_state),
        "without_bytes": _size(without),
        "store_bytes": _size(with_state / "final-state"),
        "referred_bytes": sum(r["bytes"] for r in refs),
        "first_stored": refs[0]["storedBytes"],
        "later_stored": statistics.median(r["storedBytes"] for r in refs[1:]),
        "state_bytes": refs[0]["bytes"],
    }


def regrade(project: Path, run_dir: Path) -> dict[str, float]:
    """Wall and CPU time of regrading the run, per trial (median of REPETITIONS)."""
    wall: list[float] = []
    cpu: list[float] = []
    for repetition in range(REPETITIONS):
        started, used = time.perf_counter(), _cpu()
        outcome = anyio.run(
            lambda r=repetition: regrade_run(
                run_dir, project=project, out=project / f"regraded-{r}", jobs=1, html=False
            )
        )
        wall.append((time.perf_counter() - started) / TRIALS)
        cpu.append((_cpu() - used) / TRIALS)
        statuses = {t.regrade.status for t in outcome.report.all_trials() if t.regrade is not None}
        if statuses != {"regraded"} or outcome.report.exit_code() != 0:
            raise RuntimeError(f"the regrade did not regrade every trial: {statuses}")
    return {"wall": statistics.median(wall) * 1000, "cpu": statistics.median(cpu) * 1000}


def main() -> None:
    """Print the three measurements."""
    print(f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="bench-final-state-") as tmp:
        project = make_project(Path(tmp) / "project", trials=TRIALS)
        with _capture_clock() as spent:
            times = per_trial(project)
        recorded = (
            statistics.median(a + b for a, b in zip(spent[::2], spent[1::2], strict=False)) * 1000
        )
        on, off = times["on"], times["off"]
        on_cpu, off_cpu = times["on_cpu"], times["off_cpu"]
        print(
            f"(a) per trial: {on:.1f} ms with final states vs {off:.1f} ms without "
            f"({on / off:.2f}x); CPU {on_cpu:.1f} ms vs {off_cpu:.1f} ms: "
            f"+{on_cpu - off_cpu:.1f} ms ({on_cpu / off_cpu:.2f}x); recording one trial's "
            f"final state itself: {recorded:.1f} ms CPU (median)"
        )
        sizes = disk(project)
        mib = 1024 * 1024
        print(
            f"(b) run directory of {TRIALS} trials: {sizes['with_bytes'] / mib:.2f} MiB with "
            f"vs {sizes['without_bytes'] / mib:.2f} MiB without; the store "
            f"{sizes['store_bytes'] / mib:.2f} MiB holds states referring to "
            f"{sizes['referred_bytes'] / mib:.1f} MiB "
            f"({sizes['referred_bytes'] / sizes['store_bytes']:.1f}x less); a trial's state "
            f"refers to {sizes['state_bytes'] / mib:.2f} MiB, the first trial stored "
            f"{sizes['first_stored'] / 1024:.0f} KiB, each later one "
            f"{sizes['later_stored'] / 1024:.0f} KiB"
        )
        figures = regrade(project, sizes["run_dir"])
        print(
            f"(c) regrade: {figures['wall']:.1f} ms per trial ({figures['cpu']:.1f} ms CPU) vs "
            f"the run's {on:.1f} ms ({on_cpu:.1f} ms CPU) per trial with an instant host: "
            f"{figures['cpu'] / on_cpu:.2f}x the CPU, and no host session"
        )
