"""Balanced shards against round robin on a suite whose durations are skewed tenfold.

Twelve scenarios of two trials each, split over four shards (``--jobs 1`` each):
three scenarios take ten times longer than the other nine (their stand-in session
sleeps 3 s instead of 0.3 s), and they sit where round robin gives all their trials
to shards 1 and 2. First one unsharded run (``--jobs 4``) records the durations;
then the four round-robin shards and the four shards balanced by that report
(``--balance duration --balance-from``) each run on their own, one after another,
as if each had a machine of its own. A split's makespan is its slowest shard's
wall time. Printed: every shard's expected (``meta.shardBalance``) and actual
time, both makespans, and their ratio.

Run from the repository root: ``python -m bench shards``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from atlante_eval import RunReport, SessionEnd, SessionUsage, TrialContext, run_eval
from atlante_eval.hosts.base import run_json_stream

from .bench_engine import make_project

SHARDS = 4
TRIALS = 2
#: Seconds a long and a short scenario's session sleep: a tenfold skew.
LONG_S = 3.0
SHORT_S = 0.3
#: Scenario names (the plan sorts by name); the long ones are scenarios 0, 2 and 4, so
#: with two trials each round robin puts all six long trials on shards 1 and 2.
NAMES = [f"s{n:02d}" for n in range(12)]
LONG = frozenset({"s00", "s02", "s04"})

_SCENARIO_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
_SESSION = (
    'sleep "$1"\n'
    "printf 'export const ok = true;\\n' > src/health.ts\n"
    'printf \'%s\\n\' \'{"type": "step_finish", "part": {"tokens": {"total": 100}}}\'\n'
)


class SkewedHost:
    """A host whose session (a shell) sleeps as long as its scenario takes, then reports."""

    name = "bench-skewed"
    version: str | None = None
    ignored_changes: Sequence[str] = ()

    async def probe(self) -> None:
        """Nothing to probe."""

    def prepare(self, context: TrialContext) -> None:
        """Nothing to prepare."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Sleep the scenario's time, make the change, report usage."""
        latency = LONG_S if context.scenario.name in LONG else SHORT_S

        def on_event(event: dict[str, Any]) -> None:
            part = event.get("part")
            if isinstance(part, dict):
                usage.observe_tokens(int(part["tokens"]["total"]))

        result = await run_json_stream(
            ["sh", "-c", _SESSION, "session", str(latency)],
            cwd=context.sandbox,
            env={"PATH": os.environ.get("PATH", "")},
            on_event=on_event,
        )
        return SessionEnd(error=None if result.returncode == 0 else "session failed")


def _skewed_project(root: Path) -> Path:
    project = make_project(root, trials=TRIALS, max_sessions=len(NAMES) * TRIALS)
    (project / "eval" / "scenarios" / "bench.eval.json").unlink()
    for name in NAMES:
        document = {
            "$schema": _SCENARIO_URI,
            "version": "0.1",
            "name": name,
            "task": {"fixture": "eval/fixtures/app", "prompt": "Add a health flag."},
            "checks": [{"type": "file-exists", "path": "src/health.ts"}],
        }
        path = project / "eval" / "scenarios" / f"{name}.eval.json"
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return project


def _run(project: Path, out: Path, **options: Any) -> RunReport:
    async def go() -> RunReport:
        return await run_eval(project, host=SkewedHost(), out=out, html=False, **options)  # type: ignore[arg-type]

    report = anyio.run(go)
    if {t.verdict for t in report.all_trials()} != {"pass"}:
        raise RuntimeError("benchmark trials did not all pass")
    return report


def _shards(project: Path, out: Path, **options: Any) -> list[RunReport]:
    return [
        _run(project, out / f"shard-{i}", shard=f"{i}/{SHARDS}", jobs=1, **options)
        for i in range(1, SHARDS + 1)
    ]


def _walls(reports: list[RunReport]) -> list[float]:
    return [(r.meta.wall_time_ms or 0) / 1000 for r in reports]


def main() -> None:
    """Run the unsharded baseline, then both splits, and print the makespans."""
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
        work = Path(tmp)
        project = _skewed_project(work / "project")
        earlier = _run(project, work / "earlier", jobs=4)
        earlier_dir = work / "earlier" / earlier.run_id
        round_robin = _shards(project, work / "rr")
        balanced = _shards(project, work / "balanced", balance="duration", balance_from=earlier_dir)
    record = balanced[0].meta.shard_balance
    assert record is not None
    rr_walls, balanced_walls = _walls(round_robin), _walls(balanced)
    print(
        f"suite: {len(NAMES)} scenarios x {TRIALS} trials, {len(LONG)} take {LONG_S:g} s, "
        f"the rest {SHORT_S:g} s; {SHARDS} shards at --jobs 1"
    )
    print("round robin, actual per shard: " + ", ".join(f"{w:.1f} s" for w in rr_walls))
    print(
        "balanced, expected per shard:  "
        + ", ".join(f"{load.expected_ms / 1000:.1f} s" for load in record.shards)
    )
    print("balanced, actual per shard:    " + ", ".join(f"{w:.1f} s" for w in balanced_walls))
    print(
        f"expected makespan: round robin {record.round_robin_makespan_ms / 1000:.1f} s, "
        f"balanced {record.expected_makespan_ms / 1000:.1f} s"
    )
    rr, bal = max(rr_walls), max(balanced_walls)
    print(f"actual makespan: round robin {rr:.1f} s, balanced {bal:.1f} s: {rr / bal:.2f}x faster")
