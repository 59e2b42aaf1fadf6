"""Track a run's trials as they finish: journal them, announce scenarios, assemble results.

:class:`RunProgress` is what the engine reports each trial to: it records the
result (and journals it for ``--resume``), and turns trial events into scenario
events for the progress callback. :func:`scenario_results` assembles the
report's scenarios from it, a trial that never finished counting as an
infra-error with whatever activity its transcript recorded, and one that never
started marked ``notStarted`` (it enters no pass rate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio

from ..project import Plan, PlannedTrial, Scenario
from ..report import (
    ProgressEvent,
    RunFiles,
    ScenarioFinished,
    ScenarioResult,
    ScenarioStarted,
    TrialFinished,
    TrialResult,
    TrialStarted,
)
from ..transcript import Redactor, recorded_activity
from .engine import call_sink
from .journal import Journal
from .prepare import ProgressCallback
from .summary import scenario_result

__all__ = ["RunProgress", "scenario_results"]


@dataclass
class RunProgress:
    """Records finished trials (in the journal too) and turns them into scenario events."""

    plan: Plan
    positions: list[int]
    sink: ProgressCallback | None
    fingerprints: Mapping[str, str]
    definitions: Mapping[str, str]
    journal: Journal | None = None
    run_files: RunFiles | None = None
    """The run directory, once reserved (transcripts of unfinished trials are found there)."""
    announce: bool = True
    """Announce a scenario when its last planned trial ends (adaptive runs announce it)."""
    done: dict[str, int] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    results: dict[int, TrialResult] = field(default_factory=dict)
    begun: set[tuple[str, str | None, int]] = field(default_factory=set)
    """The trials that started (scenario, arm, index; the arm names the plan key): an
    unfinished one outside it never ran."""

    def expected(self, name: str) -> int:
        return sum(1 for p in self.positions if self.plan.trials[p].scenario.name == name)

    async def emit(self, event: ProgressEvent) -> None:
        if isinstance(event, TrialStarted):
            self.begun.add((event.scenario, event.variant, event.trial))
            await self._scenario_started(event.scenario)
        await call_sink(self.sink, event)

    async def _scenario_started(self, name: str) -> None:
        if name not in self.started:
            self.started.add(name)
            await call_sink(self.sink, ScenarioStarted(name))

    async def trial_done(self, planned: PlannedTrial, result: TrialResult) -> None:
        self.results[planned.position] = result
        name, key = planned.scenario.name, planned.key
        if self.journal is not None:
            await anyio.to_thread.run_sync(
                self.journal.record, key, planned.index, self.fingerprints.get(key), result
            )
        await self._scenario_started(name)
        self.done[name] = self.done.get(name, 0) + 1
        finished = TrialFinished(name, planned.index, result, variant=planned.variant)
        await call_sink(self.sink, finished)
        if self.announce and self.done[name] == self.expected(name):
            await self.scenario_finished(planned.scenario)

    async def scenario_finished(self, scenario: Scenario) -> None:
        """Emit ScenarioFinished with the scenario's trials so far."""
        name = scenario.name
        trials = [
            (self.plan.trials[p], self.results[p])
            for p in self.positions
            if self.plan.trials[p].scenario.name == name and p in self.results
        ]
        result = _with_arms(scenario, trials, self.fingerprints, self.definitions)
        await call_sink(self.sink, ScenarioFinished(name, result))


def scenario_results(
    plan: Plan,
    progress: RunProgress,
    *,
    interrupted: bool,
    run_files: RunFiles | None = None,
    redact: Redactor | None = None,
) -> dict[str, ScenarioResult]:
    """Every scenario's result; a planned trial that did not finish is an infra-error.

    ``redact`` removes the run's secret values from what the scenario stores (its prompt).
    """
    by_name: dict[str, list[tuple[PlannedTrial, TrialResult]]] = {}
    for position in progress.positions:
        planned = plan.trials[position]
        result = progress.results.get(position)
        if result is None:
            result = _unfinished(planned, progress, interrupted=interrupted, run_files=run_files)
        by_name.setdefault(planned.scenario.name, []).append((planned, result))
    return {
        scenario.name: _with_arms(
            scenario,
            by_name[scenario.name],
            progress.fingerprints,
            progress.definitions,
            redact,
        )
        for scenario in plan.scenarios
        if scenario.name in by_name
    }


def _unfinished(
    planned: PlannedTrial, progress: RunProgress, *, interrupted: bool, run_files: RunFiles | None
) -> TrialResult:
    """The infra-error of a trial the run stopped before it finished (or started)."""
    name = planned.scenario.name
    recorded = (
        recorded_activity(run_files, planned.key, planned.index) if run_files is not None else None
    )
    stopped = "interrupted" if interrupted else "stopped"
    begun = (name, planned.variant, planned.index) in progress.begun or recorded is not None
    return TrialResult(
        i=planned.index,
        verdict="infra-error",
        duration_ms=0,
        error=f"the run was {stopped} before this trial {'finished' if begun else 'started'}",
        transcript=recorded[0] if recorded else None,
        activity=recorded[1] if recorded else None,
        not_started=None if begun else True,
        variant=planned.variant,
    )


def _with_arms(
    scenario: Scenario,
    trials: list[tuple[PlannedTrial, TrialResult]],
    fingerprints: Mapping[str, str],
    definitions: Mapping[str, str],
    redact: Redactor | None = None,
) -> ScenarioResult:
    """The scenario's result: the control arm's (or the run's) trials, and the other arms'
    results under ``arms``, each with its own fingerprint."""
    by_key: dict[str, tuple[str | None, list[TrialResult]]] = {}
    for planned, result in trials:
        by_key.setdefault(planned.key, (planned.variant, []))[1].append(result)
    results = {
        key: scenario_result(
            scenario,
            sorted(found, key=lambda t: t.i),
            fingerprint=fingerprints.get(key),
            definition=definitions.get(scenario.name),
            redact=redact,
        )
        for key, (_arm, found) in by_key.items()
    }
    arms = {
        arm: results[key]
        for key, (arm, _found) in by_key.items()
        if key != scenario.name and arm is not None
    }
    control = results.get(scenario.name)
    if control is None:  # a shard that ran none of the control's trials of this scenario
        control = scenario_result(
            scenario,
            [],
            fingerprint=fingerprints.get(scenario.name),
            definition=definitions.get(scenario.name),
            redact=redact,
        )
    if not arms:
        return control
    return control.model_copy(update={"arms": {a: arms[a] for a in sorted(arms)}})
