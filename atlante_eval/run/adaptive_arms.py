"""Adaptive runs with arms: add blocks of trials until each arm is decided against the control.

``run --until-decided`` on a run with arms (``eval.variants``) needs no BASE report:
every non-control arm of every scenario is compared with the control arm of the same
scenario, both growing wave by wave in the same randomized blocks. A scenario starts
at the first planned look; after each wave, each of its undecided arms is judged by
:func:`atlante_eval.stats.two_sample.assess_arm` (the design calibrated for a control
that grows with the arm). A decided arm gets no more trials; the control goes on
while any arm of the scenario does. ``--max-trials``, ``maxSessions`` and
``--max-cost`` stop it as they stop a run against BASE. Trials keep their plan order
(indices 0, 1, ... in their blocks), so ``--resume`` reaches the same decisions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ..diagnostics import Diagnostic
from ..project import Scenario
from ..project.variants import Arm, arm_key
from ..report import (
    AdaptiveLook,
    AdaptiveRecord,
    AdaptiveScenario,
    AdaptiveStop,
    RunReport,
    ScenarioLooked,
    TrialResult,
    statistics_of,
)
from ..report.arms import arm_scenarios
from ..report.uplift import uplift_record
from ..stats.futility import FUTILITY
from ..stats.two_sample import METHOD, arm_calibration, assess_arm
from .adaptive import AdaptiveSettings, Judged, decorated, graded_counts

__all__ = ["ArmsDriver"]


@dataclass(kw_only=True)
class _Duel(Judged):
    """One arm against the control in one scenario."""

    scenario: str
    arm: str
    control: tuple[int, int] = (0, 0)
    """The control's passed and graded trials at the last look."""

    @property
    def key(self) -> str:
        return arm_key(self.scenario, self.arm, control=False)


class ArmsDriver:
    """Decides each wave's trials of every arm and keeps the decision record."""

    def __init__(
        self, settings: AdaptiveSettings, scenarios: Sequence[Scenario], arms: Sequence[Arm]
    ) -> None:
        self.settings = settings
        self.control = next(arm.name for arm in arms if arm.control)
        others = [arm.name for arm in arms if not arm.control]
        names = sorted(s.name for s in scenarios)
        self.duels = {
            (name, arm): _Duel(scenario=name, arm=arm) for name in names for arm in others
        }
        self.targets = dict.fromkeys(names, 0)
        self.announced: set[str] = set()
        # As the uplift section counts its Holm family: every arm's scenarios, plus
        # each arm's overall row when there are at least two scenarios.
        self.design = settings.design(len(others) * (len(names) + (1 if len(names) >= 2 else 0)))

    def notices(self) -> list[Diagnostic]:
        """Warnings found before the first trial (none: the control is in the run)."""
        return []

    def _going(self, name: str) -> list[_Duel]:
        return [d for (scenario, _), d in self.duels.items() if scenario == name and not d.stopped]

    def _wave(self, name: str) -> dict[str, int]:
        target = self.targets[name]
        return {name: target} | {duel.key: target for duel in self._going(name)}

    def first_wave(self) -> dict[str, int]:
        """Every scenario's control and arms up to the first look."""
        wave: dict[str, int] = {}
        for name in self.targets:
            self.targets[name] = self.design.looks[0]
            wave |= self._wave(name)
        return wave

    def next_wave(self) -> dict[str, int]:
        """The control and undecided arms of every scenario still going, to the next look."""
        wave: dict[str, int] = {}
        for name, target in self.targets.items():
            if self._going(name):
                self.targets[name] = next(n for n in self.design.looks if n > target)
                wave |= self._wave(name)
        return wave

    def take_looks(
        self, trials: Mapping[str, Sequence[TrialResult]], fresh: Collection[str]
    ) -> list[ScenarioLooked]:
        """Judge every undecided arm of the wave against its scenario's control."""
        events: list[ScenarioLooked] = []
        for name, target in self.targets.items():
            if name not in trials:
                continue
            control = graded_counts(trials[name])
            for duel in self._going(name):
                if duel.key not in trials or not ({name, duel.key} & set(fresh)):
                    continue
                look = self._observe(duel, trials[duel.key], control, target)
                events.append(
                    ScenarioLooked(
                        duel.key,
                        look,
                        control[0] / control[1] if control[1] else 0.0,
                        duel.stopped,
                        max_trials=self.design.looks[-1],
                        control=self.control,
                    )
                )
        return events

    def _observe(
        self, duel: _Duel, trials: Sequence[TrialResult], control: tuple[int, int], target: int
    ) -> AdaptiveLook:
        passed, graded = graded_counts(trials)
        look = assess_arm(
            self.design,
            control_passed=control[0],
            control_graded=control[1],
            passed=passed,
            graded=graded,
            look=target,
        )
        duel.control = control
        return duel.take(look, trials, target=target, last=self.design.looks[-1])

    def stop_all(self, reason: AdaptiveStop) -> list[str]:
        """Stop every arm still going; returns their keys."""
        stopped = [duel for duel in self.duels.values() if duel.stopped is None]
        for duel in stopped:
            duel.stopped = reason
        return [duel.key for duel in stopped]

    def finished(self, keys: Collection[str]) -> list[str]:
        """Scenarios of the wave none of whose arms goes on (each once)."""
        done = [
            name
            for name in self.targets
            if name in keys and name not in self.announced and not self._going(name)
        ]
        self.announced.update(done)
        return done

    def record(self, report: RunReport) -> AdaptiveRecord:
        """The decision record of the finished (or interrupted) run."""
        self.stop_all("interrupted")
        settings = self.settings
        uplift = uplift_record(report, alpha=settings.alpha, margin=settings.margin)
        bounds = arm_calibration(
            self.design.looks,
            share=self.design.share,
            alpha=self.design.alpha,
            margin=self.design.margin,
        )
        scenarios: dict[str, AdaptiveScenario] = {}
        for duel in self.duels.values():
            result = arm_scenarios(report, duel.arm).get(duel.scenario)
            ran = statistics_of(result).executed if result is not None else 0
            row = uplift.arms[duel.arm].scenarios.get(duel.scenario) if uplift else None
            scenarios[duel.key] = AdaptiveScenario(
                baseline_passed=duel.control[0],
                baseline_graded=duel.control[1],
                looks=duel.looks,
                decision=duel.decision,
                stopped=duel.stopped or "interrupted",
                trials=ran,
                fixed_trials=duel.fixed(
                    duel.control, ran, settings=settings, family=self.design.family
                ),
                compare_verdict=row.verdict if row is not None else None,
                critical_p=bounds.critical_p,
                look_confidence=1.0 - bounds.unchanged_level,
                scenario=duel.scenario,
                variant=duel.arm,
            )
        every = [
            trial
            for arm in [self.control, *{d.arm: None for d in self.duels.values()}]
            for result in arm_scenarios(report, arm).values()
            for trial in result.trials
        ]
        used = sum(1 for t in every if t.verdict != "skipped-budget")
        per_scenario = max(
            (
                s.fixed_trials if s.fixed_trials is not None else s.trials
                for s in scenarios.values()
            ),
            default=0,
        )
        fixed = per_scenario * len(self.targets) * (1 + len({d.arm for d in self.duels.values()}))
        return AdaptiveRecord(
            method=METHOD,
            baseline=f"control arm {self.control}",
            baseline_run_id=report.run_id,
            control=self.control,
            alpha=settings.alpha,
            margin=settings.margin,
            family_size=self.design.family,
            looks=list(self.design.looks),
            look_confidence=1.0 - bounds.unchanged_level,
            futility=FUTILITY,
            min_trials=self.design.looks[0],
            max_trials=self.design.looks[-1],
            new_trials=settings.fixed_count,
            max_cost=settings.max_cost,
            cost=round(sum(t.cost or 0.0 for t in every), 6),
            scenarios=scenarios,
            trials_used=used,
            fixed_per_scenario=per_scenario,
            fixed_trials=fixed,
            saving=fixed - used,
            compare_agrees=all(s.decision == s.compare_verdict for s in scenarios.values()),
        )

    def decorate(self, report: RunReport) -> RunReport:
        """Add the decision record to the report about to be published (never loses it)."""
        return decorated(report, self.record)
