"""How long ``validate`` takes on a project with 1,000 scenario documents.

Builds a project with 1,000 scenario documents (each with a command, a regex
file-contains and a diff-allowlist check, sharing one fixture) and native
outputs in a temporary directory, then times :func:`atlante_eval.load_suite`,
which runs every gate ``atlante-eval validate`` runs. As a yardstick measured
in the same run on the same files, it also times a trivial loop that only reads
and ``json.loads`` the 1,000 documents; the ratio says how much the validation
itself costs on top of the unavoidable I/O and parsing.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from atlante_eval import load_suite

#: Scenario documents in the generated project.
SCENARIOS = 1_000
#: Timed repetitions of each measurement (the median is reported).
REPETITIONS = 7
#: What "well under a few seconds" means for this benchmark.
BUDGET_SECONDS = 1.0

_SCHEMA = "https://atlante.sh/schema/v0.1/schema.json"
_SCENARIO_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"


def _write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _scenario(index: int) -> dict[str, Any]:
    return {
        "$schema": _SCENARIO_URI,
        "version": "0.1",
        "name": f"scenario-{index:04d}",
        "description": f"Generated scenario number {index}.",
        "task": {
            "fixture": "eval/fixtures/app",
            "agent": "reviewer",
            "prompt": f"Add endpoint number {index} and its test.",
        },
        "checks": [
            {"type": "command", "run": ["bun", "test"], "outputMatches": r"\d+ pass"},
            {
                "type": "file-contains",
                "path": "src/routes.ts",
                "pattern": r"/health\b",
                "regex": True,
            },
            {"type": "diff-allowlist", "allow": ["src/routes.ts", "src/health.test.ts"]},
        ],
    }


def build_project(root: Path, count: int = SCENARIOS) -> list[Path]:
    """Create a valid project with ``count`` scenarios under ``root``; return their paths."""
    _write(
        root / "atlante.jsonc",
        {
            "$schema": _SCHEMA,
            "eval": {"host": "opencode", "scenarios": "eval/scenarios/**/*.eval.json*"},
        },
    )
    fixture = root / "eval" / "fixtures" / "app" / "src"
    fixture.mkdir(parents=True)
    (fixture / "routes.ts").write_text("export const routes = [];\n", encoding="utf-8")
    agent = b'---\ndescription: "reviewer"\n---\nYou review code.'
    (root / ".opencode" / "agents").mkdir(parents=True)
    (root / ".opencode" / "agents" / "reviewer.md").write_bytes(agent)
    entry = {
        "kind": "agent",
        "id": "reviewer",
        "path": ".opencode/agents/reviewer.md",
        "sha256": hashlib.sha256(agent).hexdigest(),
    }
    _write(
        root / ".atlante" / "opencode-native.json",
        {"format": "atlante-opencode-native", "version": 1, "files": [entry]},
    )
    paths = []
    for index in range(count):
        path = root / "eval" / "scenarios" / f"group-{index % 10}" / f"s{index:04d}.eval.json"
        _write(path, _scenario(index))
        paths.append(path)
    return paths


def _median_seconds(action: Callable[[], object]) -> float:
    action()  # warm the page cache and imports once, untimed
    samples = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    """Build the project, time load_suite and the read+parse baseline, print the results."""
    with tempfile.TemporaryDirectory(prefix="atlante-eval-bench-") as temporary:
        root = Path(temporary)
        paths = build_project(root)

        def validate() -> None:
            suite = load_suite(root)
            assert len(suite.scenarios) == SCENARIOS

        def read_and_parse() -> None:
            for path in paths:
                json.loads(path.read_text(encoding="utf-8"))

        validate_s = _median_seconds(validate)
        baseline_s = _median_seconds(read_and_parse)

    per_scenario_us = validate_s / SCENARIOS * 1e6
    verdict = "within" if validate_s <= BUDGET_SECONDS else "OVER"
    print(f"scenarios:                  {SCENARIOS}")
    print(f"repetitions (median of):    {REPETITIONS}")
    print(f"load_suite (validate):      {validate_s:.3f} s median")
    print(f"per scenario:               {per_scenario_us:.0f} us")
    print(f"read + json.loads baseline: {baseline_s:.3f} s median")
    print(f"ratio validate / baseline:  {validate_s / baseline_s:.1f}x")
    print(f"budget {BUDGET_SECONDS:.1f} s:               {verdict}")
