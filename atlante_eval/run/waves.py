"""Run an adaptive run wave by wave, whichever driver decides the waves.

A driver (:class:`.adaptive.AdaptiveDriver` against BASE, or
:class:`.adaptive_arms.ArmsDriver` for arms against their control) names each
wave's target trial counts by plan key; :func:`run_waves` runs those trials,
hands the driver what they gave, stops everything when ``maxSessions`` or
``--max-cost`` is spent, and announces each scenario that stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ..diagnostics import Diagnostic, warning
from ..project import Plan, PlannedTrial, Scenario
from ..report import (
    AdaptiveStop,
    DiagnosticNotice,
    ProgressEvent,
    RunReport,
    ScenarioLooked,
    TrialResult,
)
from .engine import Engine

if TYPE_CHECKING:
    from .adaptive import AdaptiveSettings

__all__ = ["WaveDriver", "WaveProgress", "run_adaptive", "run_waves"]

#: Runs one wave: the plan positions to run (reused trials included).
WaveRunner = Callable[[list[int]], Awaitable[None]]
EventSink = Callable[[ProgressEvent], Awaitable[None]]


class WaveDriver(Protocol):
    """What :func:`run_waves` asks of a driver (:class:`AdaptiveDriver`, or the arms')."""

    settings: AdaptiveSettings

    def first_wave(self) -> dict[str, int]:
        """Target trial counts of the first wave, by plan key (``PlannedTrial.key``)."""

    def next_wave(self) -> dict[str, int]:
        """Target counts of the keys still going (empty: the run is over)."""

    def take_looks(
        self, trials: Mapping[str, Sequence[TrialResult]], fresh: Collection[str]
    ) -> list[ScenarioLooked]:
        """Judge the wave just run (each key's trials so far; ``fresh``: keys with new
        trials); the looks taken, as progress events."""

    def stop_all(self, reason: AdaptiveStop) -> list[str]:
        """Stop everything still going."""

    def finished(self, keys: Collection[str]) -> list[str]:
        """Scenarios of these keys that just stopped (each named once)."""

    def notices(self) -> list[Diagnostic]:
        """Warnings found before the first trial."""

    def decorate(self, report: RunReport) -> RunReport:
        """The report with the decision record."""


async def run_waves(
    driver: WaveDriver,
    *,
    plan: Plan,
    results: Mapping[int, TrialResult],
    run_wave: WaveRunner,
    emit: EventSink,
    finished: Callable[[str], Awaitable[None]],
) -> None:
    """Run waves until everything stopped; ``finished`` announces each stopped scenario."""
    where = {(t.key, t.index): t.position for t in plan.trials}
    done: dict[str, int] = {}
    warned = False
    wave = driver.first_wave()
    while wave:
        positions = sorted(
            where[(key, index)]
            for key, target in wave.items()
            for index in range(done.get(key, 0), target)
        )
        await run_wave(positions)
        before = dict(done)
        done.update(wave)
        skipped = any(results[p].verdict == "skipped-budget" for p in positions if p in results)
        # A key none of whose wave trials ran has nothing new to look at.
        fresh = {
            key
            for key in wave
            if any(
                results[where[(key, i)]].verdict != "skipped-budget"
                for i in range(before.get(key, 0), done[key])
            )
        }
        looks = driver.take_looks(
            {key: [results[where[(key, i)]] for i in range(done[key])] for key in wave}, fresh
        )
        limit = driver.settings.max_cost
        if skipped:
            driver.stop_all("max-sessions")
        elif limit is not None:
            costs = [r.cost for r in results.values() if r.cost is not None]
            if costs and sum(costs) >= limit:
                driver.stop_all("max-cost")
            elif not costs and not warned:
                warned = True
                await emit(DiagnosticNotice(_cost_unknown(limit)))
        for look in looks:
            await emit(look)
        for name in driver.finished(wave):
            await finished(name)
        wave = driver.next_wave()


def _cost_unknown(limit: float) -> Diagnostic:
    return warning(
        "adaptive-cost-unknown",
        f"--max-cost {limit:g} cannot be enforced: the host reported no cost for any trial",
        next="use maxSessions (eval.budget) to bound the run, or a host that reports cost",
    )


class WaveProgress(Protocol):
    """What :func:`run_adaptive` needs of the run's progress recorder."""

    plan: Plan
    positions: list[int]
    started: set[str]
    results: dict[int, TrialResult]

    async def emit(self, event: ProgressEvent) -> None:
        """Forward a progress event."""

    async def trial_done(self, planned: PlannedTrial, result: TrialResult) -> None:
        """Record a finished trial."""

    async def scenario_finished(self, scenario: Scenario) -> None:
        """Announce that a scenario stopped."""


async def run_adaptive(
    driver: WaveDriver,
    engine: Engine,
    progress: WaveProgress,
    reused: Mapping[int, TrialResult],
) -> None:
    """Run waves until decided; reused trials (``--resume``) stand in for their positions.

    Each wave shares what is left of ``maxSessions``; a reused trial counts as the
    session it took in the run it comes from, so a resumed run spends the budget
    as the interrupted one did.
    """
    plan = progress.plan
    used = 0

    async def wave(positions: list[int]) -> None:
        nonlocal used
        progress.positions.extend(positions)
        progress.started.clear()  # each wave's trials are announced under their scenario
        again = [p for p in positions if p not in reused]
        for position in positions:
            if position in reused:
                used += 1
                await progress.trial_done(plan.trials[position], reused[position])
        used += await engine.run(again, sessions=plan.config.max_sessions - used)

    async def finished(name: str) -> None:
        await progress.scenario_finished(next(s for s in plan.scenarios if s.name == name))

    await run_waves(
        driver,
        plan=plan,
        results=progress.results,
        run_wave=wave,
        emit=progress.emit,
        finished=finished,
    )
