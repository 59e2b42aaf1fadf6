"""Projects and baselines for adaptive-run tests: scenarios whose pass chance is fixed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from standin import actions

from atlante_eval import EvalRunError, Meta, ProgressEvent, RunReport, TrialFinished, TrialResult
from atlante_eval.hosts import Host
from atlante_eval.report import MetaConfig, finalize, summarize
from atlante_eval.run import run_options
from atlante_eval.run.runner import RunControl, execute_run

WRITE = {"write": "x.txt", "content": "done\n"}
CHECKS = [{"type": "file-exists", "path": "x.txt"}]


def chance_scenario(
    name: str, chance: float, *, seed: int = 7, cost: float | None = None
) -> dict[str, Any]:
    """A scenario the stand-in passes with probability ``chance`` (seeded by trial index)."""
    steps: list[dict[str, Any]] = [{"chance": chance, "seed": seed, "then": [WRITE]}]
    if cost is not None:
        steps.append({"usage": 10, "cost": cost})
    return scenario(name, prompt=actions(*steps), checks=CHECKS)


def adaptive_project(root: Path, docs: list[dict[str, Any]], **budget: Any) -> Path:
    """A project with these scenarios and budget (trials default 2)."""
    budget.setdefault("trials", 2)
    return make_project(root, scenarios=docs, eval_extra={"budget": budget})


def baseline(
    path: Path,
    counts: dict[str, tuple[int, int]],
    *,
    run_id: str = "2026-01-01T00-00-00-base",
    definitions: dict[str, str] | None = None,
) -> Path:
    """Write a baseline report: per scenario ``(passed, trials)``.

    Without ``definitions`` it has the reference tool's shape: no ``stats``, no digests.
    """
    scenarios = {
        name: summarize(
            [
                TrialResult(i=i, verdict="pass" if i < passed else "fail", duration_ms=10)
                for i in range(total)
            ]
        )
        for name, (passed, total) in counts.items()
    }
    config = MetaConfig(
        trials=max(t for _, t in counts.values()),
        timeout_ms=600_000,
        max_sessions=100,
        max_tokens=200_000,
        setup_timeout_ms=120_000,
        check_timeout_default_ms=60_000,
    )
    meta = Meta(
        atlante="0.1.0", host="opencode", model="unknown", model_version="unknown", config=config
    )
    report = finalize(RunReport(run_id=run_id, meta=meta, scenarios=scenarios))
    document = json.loads(report.to_json())
    for name, result in document["scenarios"].items():
        result.pop("stats", None)
        if definitions and name in definitions:
            result["definition"] = definitions[name]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


def decisions(report: RunReport) -> dict[str, Any]:
    """Every decision of an adaptive report with its looks, by key: what a resume must repeat."""
    assert report.adaptive is not None
    return {
        key: (s.decision, s.stopped, s.trials, [look.model_dump() for look in s.looks])
        for key, s in report.adaptive.scenarios.items()
    }


def interrupted_run(
    project: Path, settings: dict[str, Any], *, after: int, out: Path, host: Host | None = None
) -> EvalRunError:
    """Run ``project`` (``--jobs 1``) and interrupt it once ``after`` trials finished: the
    run's error, with the partial report it published."""
    control = RunControl()
    finished = 0

    def on_event(event: ProgressEvent) -> None:
        nonlocal finished
        if isinstance(event, TrialFinished):
            finished += 1
            if finished == after:
                control.interrupt()

    async def interrupted() -> EvalRunError:
        with pytest.raises(EvalRunError) as caught:
            await execute_run(
                project,
                run_options(jobs=1, out=out, **settings),
                host=host,
                on_event=on_event,
                control=control,
            )
        return caught.value

    return anyio.run(interrupted)
