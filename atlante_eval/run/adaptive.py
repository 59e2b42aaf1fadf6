"""Adaptive runs: add trials wave by wave until each scenario's comparison is decided.

``run --against BASE --until-decided`` starts every scenario at the first planned
look (``--min-trials``, else the configured trials). After each wave, every
scenario compared with BASE is judged by :func:`atlante_eval.stats.sequential.assess`;
undecided ones get trials up to their next planned look, decided ones stop. A
scenario stops at ``--max-trials``, and every scenario stops when ``maxSessions``
is spent (the wave's remaining trials are ``skipped-budget``) or the host-reported
cost reaches ``--max-cost``. Scenarios BASE lacks (or never graded) run the fixed
count once and are reported ``new``. Trials keep their plan order per scenario
(indices 0, 1, ...), so ``--resume`` reuses them and reaches the same decisions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._util.logs import get_logger
from ..diagnostics import Diagnostic, warning
from ..history import blessed_name
from ..project import Scenario
from ..project.config import Project
from ..report import (
    AdaptiveDecision,
    AdaptiveLook,
    AdaptiveOverall,
    AdaptiveRecord,
    AdaptiveScenario,
    AdaptiveStop,
    RunReport,
    ScenarioLooked,
    ScenarioResult,
    TrialResult,
    check_consistent,
    load_report,
    report_path,
    statistics_of,
)
from ..report.compare import Comparison, compare_reports
from ..report.compare_notes import DETECT_POINTS
from ..stats.futility import FUTILITY
from ..stats.operating import adaptive_detectable_drop, baseline_needed
from ..stats.planning import fixed_trials
from ..stats.sequential import (
    METHOD,
    Look,
    SequentialDesign,
    assess,
    boundaries,
    look_schedule,
)
from .options import RunOptions

__all__ = [
    "AdaptiveDriver",
    "AdaptiveSettings",
    "Judged",
    "arms_settings",
    "decorated",
    "graded_counts",
    "load_settings",
    "settings_from_options",
]

log = get_logger("atlante_eval.run.adaptive")

#: Most trials per scenario an adaptive run adds when ``--max-trials`` is not given.
DEFAULT_MAX_TRIALS = 50


@dataclass(frozen=True, slots=True)
class AdaptiveSettings:
    """What an adaptive run compares with and how far it may go."""

    alpha: float
    margin: float
    first: int
    """Trials at the first look."""
    max_trials: int
    fixed_count: int
    """Trials of a scenario BASE lacks."""
    max_cost: float | None = None
    baseline: RunReport | None = None
    """The BASE report (None: a run with arms, decided against its control arm)."""
    baseline_path: str = ""
    """Where BASE was read from."""

    def design(self, family: int) -> SequentialDesign:
        """The sequential design of these bounds for ``family`` tests sharing alpha."""
        return SequentialDesign(
            alpha=self.alpha,
            margin=self.margin,
            looks=look_schedule(self.first, self.max_trials),
            family=max(1, family),
        )


def load_settings(
    against: Path,
    *,
    baseline: tuple[RunReport, str] | None = None,
    alpha: float,
    margin: float,
    trials: int,
    min_trials: int | None,
    max_trials: int | None,
    max_cost: float | None,
) -> AdaptiveSettings:
    """Read the baseline and resolve the look bounds.

    ``baseline`` is the BASE report already read (``--against blessed``) and its label.

    Raises:
        DiagnosticError: ``report-unreadable`` (exit 2) for a baseline that cannot be read
            or contradicts its own trials.
    """
    base, label = baseline or (load_report(against), str(report_path(against)))
    check_consistent(base, label)  # statistics come from its trials, never its stats
    highest = max_trials if max_trials is not None else max(DEFAULT_MAX_TRIALS, trials)
    return AdaptiveSettings(
        baseline=base,
        baseline_path=label,
        alpha=alpha,
        margin=margin,
        first=min(min_trials if min_trials is not None else trials, highest),
        max_trials=highest,
        fixed_count=trials,
        max_cost=max_cost,
    )


def arms_settings(options: RunOptions, trials: int) -> AdaptiveSettings:
    """The adaptive bounds of a run with arms: no BASE, the control arm is the baseline."""
    highest = (
        options.max_trials if options.max_trials is not None else max(DEFAULT_MAX_TRIALS, trials)
    )
    first = options.min_trials if options.min_trials is not None else trials
    return AdaptiveSettings(
        alpha=options.alpha,
        margin=options.margin,
        first=min(first, highest),
        max_trials=highest,
        fixed_count=trials,
        max_cost=options.max_cost,
    )


def settings_from_options(
    options: RunOptions, trials: int, project: Project | None = None, host: str | None = None
) -> AdaptiveSettings:
    """Read ``--against`` and resolve the adaptive bounds of ``options`` (before any trial).

    ``--against blessed[:NAME]`` (when no such file exists) reads the blessed baseline
    from the project's history store: the one blessed for ``host`` (default the
    configured host) and the configured model.
    """
    assert options.against is not None
    baseline = None
    name = blessed_name(str(options.against))
    if name is not None and project is not None and not options.against.exists():
        from .record import blessed_report

        baseline = blessed_report(project, options, name, host=host)
    return load_settings(
        options.against,
        baseline=baseline,
        alpha=options.alpha,
        margin=options.margin,
        trials=trials,
        min_trials=options.min_trials,
        max_trials=options.max_trials,
        max_cost=options.max_cost,
    )


#: The most baseline trials a scenario's sequential design is calibrated on: the exact
#: design's cost grows with the square of the baseline (9 s at 400 trials, and beyond
#: about 1,000 its path counts overflow a float). A larger baseline is thinned to its
#: first graded trials by index: a subsample chosen without looking at any outcome, so
#: the design's error guarantees hold for it exactly (it loses a little power).
DESIGN_BASELINE = 200
_UNGRADED = ("skipped-budget", "infra-error")


def design_baseline(old: ScenarioResult) -> tuple[int, int, int] | None:
    """BASE's passed and graded trials the design uses, and all its graded trials.

    ``None`` when BASE has no graded trial of the scenario.
    """
    stats = statistics_of(old)
    if stats.graded < 1:
        return None
    if stats.graded <= DESIGN_BASELINE:
        return stats.passed, stats.graded, stats.graded
    graded = [
        t
        for t in sorted(old.trials, key=lambda t: t.i)
        if not t.not_started and t.verdict not in _UNGRADED
    ][:DESIGN_BASELINE]
    return sum(1 for t in graded if t.verdict == "pass"), len(graded), stats.graded


def graded_counts(trials: Sequence[TrialResult]) -> tuple[int, int]:
    """Passed and graded trials (infra-errors and skipped-budget trials are not graded)."""
    graded = [t for t in trials if t.verdict not in _UNGRADED]
    return sum(1 for t in graded if t.verdict == "pass"), len(graded)


@dataclass(kw_only=True)
class Judged:
    """One comparison's looks so far, its decision, and why it stopped (either driver's)."""

    looks: list[AdaptiveLook] = field(default_factory=list)
    decision: AdaptiveDecision = "inconclusive"
    stopped: AdaptiveStop | None = None

    def take(
        self, look: Look, trials: Sequence[TrialResult], *, target: int, last: int
    ) -> AdaptiveLook:
        """Record ``look``, taken at ``target`` planned trials of ``trials`` (``last``: the
        last planned look), and stop when it decided, gave up or was the last."""
        record = AdaptiveLook(
            trials=sum(1 for t in trials if t.verdict != "skipped-budget"),
            passed=look.passed,
            graded=look.graded,
            difference=look.difference,
            interval=look.interval,
            p_value=look.p_value,
            adjusted_p=look.adjusted_p,
            verdict=look.verdict,
            decidable=None if look.decidable is None else round(look.decidable, 6),
        )
        self.looks.append(record)
        self.decision = look.verdict
        if look.stop is not None:
            self.stopped = look.stop
        elif target >= last:
            self.stopped = "max-trials"
        return record

    def fixed(
        self, base: tuple[int, int], ran: int, *, settings: AdaptiveSettings, family: int
    ) -> int | None:
        """Trials per side a fixed-count run needs for the same decision against ``base``
        (passed, graded); ``ran`` when no decision is claimed."""
        if self.decision == "inconclusive" or not self.looks:
            return ran
        last = self.looks[-1]
        return fixed_trials(
            base[0],
            base[1],
            last.passed,
            last.graded,
            change=self.decision != "unchanged",
            alpha=settings.alpha,
            margin=settings.margin,
            family=family,
        )


def decorated(report: RunReport, record: Callable[[RunReport], AdaptiveRecord]) -> RunReport:
    """``report`` with its decision record, built by ``record``.

    A record that cannot be built leaves the report without it (and is logged):
    the trials are never lost for want of their summary.
    """
    try:
        return report.model_copy(update={"adaptive": record(report)})
    except Exception:  # publishing the trials matters more than their record
        log.exception("adaptive.record_failed")
        return report


@dataclass(kw_only=True)
class _Track(Judged):
    """One scenario's progress through the looks."""

    base: tuple[int, int] | None
    """BASE passed and graded, None for a new scenario."""
    changed: bool
    target: int = 0
    """Trials planned for the scenario so far."""


class AdaptiveDriver:
    """Decides each wave's trials and keeps the decision record."""

    def __init__(
        self,
        settings: AdaptiveSettings,
        scenarios: Sequence[Scenario],
        definitions: Mapping[str, str],
    ) -> None:
        if settings.baseline is None:
            raise ValueError("a run against BASE needs the BASE report")
        self.settings = settings
        self.base = settings.baseline
        baseline = self.base.scenarios
        self.tracks: dict[str, _Track] = {}
        self.thinned: dict[str, int] = {}
        """Scenarios whose baseline was thinned to :data:`DESIGN_BASELINE` graded trials."""
        for scenario in scenarios:
            old = baseline.get(scenario.name)
            counts = design_baseline(old) if old is not None else None
            base = counts[:2] if counts is not None else None
            if counts is not None and counts[1] < counts[2]:
                self.thinned[scenario.name] = counts[2]
            self.tracks[scenario.name] = _Track(
                base=base,
                decision="inconclusive" if base is not None else "new",
                changed=bool(
                    old is not None
                    and old.definition
                    and old.definition != definitions.get(scenario.name)
                ),
            )
        common = [name for name in self.tracks if name in baseline]
        compared = [name for name, track in self.tracks.items() if track.base is not None]
        # As compare counts its family: the compared scenarios, plus the pooled overall
        # row when at least two scenarios are common. The same or a larger family keeps
        # every decision made here one that compare also makes.
        family = len(compared) + (1 if len(common) >= 2 and compared else 0)
        self.design = settings.design(family)

    def notices(self) -> list[Diagnostic]:
        """Warnings about the baseline found before the first trial."""
        found: list[Diagnostic] = []
        source = self.settings.baseline_path
        if not any(track.base is not None for track in self.tracks.values()):
            found.append(
                warning(
                    "adaptive-baseline-mismatch",
                    "the baseline has no graded trial of any selected scenario: every "
                    f"scenario runs the fixed count ({self.settings.fixed_count}) as new",
                    source=source,
                    next="pass the baseline report of the same suite (--against)",
                )
            )
        found.extend(self._power_notice())
        if self.thinned:
            names = ", ".join(f"{name} ({n})" for name, n in sorted(self.thinned.items()))
            found.append(
                warning(
                    "adaptive-baseline-thinned",
                    f"the baseline has more than {DESIGN_BASELINE} graded trials of "
                    f"{names}: the sequential design judges against the first "
                    f"{DESIGN_BASELINE} of each, by trial index (exact, a little less power)",
                    source=source,
                    next="nothing to do; compare RUN against BASE afterwards uses every trial",
                )
            )
        changed = sorted(name for name, track in self.tracks.items() if track.changed)
        if changed:
            found.append(
                warning(
                    "adaptive-scenario-changed",
                    "scenario documents or fixtures differ from the baseline's: "
                    + ", ".join(changed),
                    source=source,
                    next="a changed scenario measures something else; rerun BASE on it",
                )
            )
        return found

    def _power_notice(self) -> list[Diagnostic]:
        """Say when the baseline's trials cannot detect a drop of 30 points (80% power)."""
        sizes = Counter(track.base[1] for track in self.tracks.values() if track.base)
        if not sizes:
            return []
        baseline, count = min(sizes.items(), key=lambda item: (-item[1], item[0]))
        design = self.design
        drop = adaptive_detectable_drop(design, baseline)
        if drop is not None and drop <= DETECT_POINTS:
            return []
        needed = baseline_needed(design, drop=DETECT_POINTS, start=baseline + 1)
        what = (
            "cannot detect any drop, not even 100% -> 0%"
            if drop is None
            else f"can detect only drops of {drop} points or more"
        )
        where = (
            f"at least {needed} are needed to detect a {DETECT_POINTS}-point drop"
            if needed is not None
            else f"no baseline detects a {DETECT_POINTS}-point drop that often within "
            f"--max-trials {design.looks[-1]}: raise --max-trials"
        )
        return [
            warning(
                "adaptive-baseline-underpowered",
                f"the baseline's {baseline} trials per scenario ({count} of "
                f"{len(self.tracks)} scenarios) {what} (from 100%, with 80% power, up to "
                f"{design.looks[-1]} HEAD trials, alpha {design.alpha:g}"
                + (f" over {design.family} tests" if design.family > 1 else "")
                + f"); {where}",
                source=self.settings.baseline_path,
                next=f"rerun the baseline with --trials {needed}"
                if needed is not None
                else "raise --max-trials, or accept that only large drops are found",
            )
        ]

    def first_wave(self) -> dict[str, int]:
        """Target trial counts of the first wave, by scenario."""
        wave = {
            name: self.design.looks[0] if track.base is not None else self.settings.fixed_count
            for name, track in self.tracks.items()
        }
        for name, target in wave.items():
            self.tracks[name].target = target
        return wave

    def next_wave(self) -> dict[str, int]:
        """Target counts for scenarios still undecided (empty: the run is over)."""
        wave: dict[str, int] = {}
        for name, track in self.tracks.items():
            if track.stopped is None:
                track.target = next(n for n in self.design.looks if n > track.target)
                wave[name] = track.target
        return wave

    def observe(self, name: str, trials: Sequence[TrialResult]) -> AdaptiveLook | None:
        """Take the look after a wave (None for a new scenario, which takes none)."""
        track = self.tracks[name]
        if track.base is None:
            track.decision, track.stopped = "new", "fixed-count"
            return None
        passed, graded = graded_counts(trials)
        look = assess(
            self.design,
            base_passed=track.base[0],
            base_graded=track.base[1],
            passed=passed,
            graded=graded,
            look=track.target,
        )
        return track.take(look, trials, target=track.target, last=self.design.looks[-1])

    def event(self, name: str, look: AdaptiveLook) -> ScenarioLooked:
        """The progress event of a look, with the scenario's state after it."""
        track = self.tracks[name]
        base = track.base or (0, 1)
        return ScenarioLooked(
            name, look, base[0] / base[1], track.stopped, max_trials=self.design.looks[-1]
        )

    def take_looks(
        self, trials: Mapping[str, Sequence[TrialResult]], fresh: Collection[str]
    ) -> list[ScenarioLooked]:
        """Look at each scenario of the wave with new trials (keys are scenario names)."""
        events = []
        for name, scenario_trials in trials.items():
            if name in fresh:
                look = self.observe(name, scenario_trials)
                if look is not None:
                    events.append(self.event(name, look))
        return events

    def finished(self, keys: Collection[str]) -> list[str]:
        """The scenarios of the wave that stopped."""
        return [name for name in keys if self.tracks[name].stopped is not None]

    def stop_all(self, reason: AdaptiveStop) -> list[str]:
        """Stop every scenario still going; returns their names."""
        stopped = [name for name, track in self.tracks.items() if track.stopped is None]
        for name in stopped:
            self.tracks[name].stopped = reason
        return stopped

    def record(self, report: RunReport) -> AdaptiveRecord:
        """The decision record of the finished (or interrupted) run."""
        settings = self.settings
        self.stop_all("interrupted")
        compared = compare_reports(self.base, report, alpha=settings.alpha, margin=settings.margin)
        scenarios: dict[str, AdaptiveScenario] = {}
        for name, track in self.tracks.items():
            result = report.scenarios.get(name)
            ran = statistics_of(result).executed if result is not None else 0
            comparison = compared.scenarios.get(name)
            bounds = boundaries(self.design, track.base[1]) if track.base else None
            scenarios[name] = AdaptiveScenario(
                baseline_passed=track.base[0] if track.base else None,
                baseline_graded=track.base[1] if track.base else None,
                changed=True if track.changed else None,
                looks=track.looks,
                decision=track.decision,
                stopped=track.stopped or "interrupted",
                trials=ran,
                fixed_trials=self._fixed(track, ran),
                compare_verdict=comparison.verdict
                if comparison is not None and track.base is not None
                else None,
                critical_p=bounds.critical_p if bounds else None,
                look_confidence=bounds.look_confidence if bounds else None,
            )
        used = sum(s.trials for s in scenarios.values())
        # One --trials count for every scenario: the most any scenario's decision needs.
        per_scenario = max(
            (
                s.fixed_trials if s.fixed_trials is not None else s.trials
                for s in scenarios.values()
            ),
            default=0,
        )
        fixed = per_scenario * len(scenarios)
        agrees = all(
            s.decision == "new" or s.decision == s.compare_verdict for s in scenarios.values()
        )
        confidences = [s.look_confidence for s in scenarios.values() if s.look_confidence]
        return AdaptiveRecord(
            method=METHOD,
            baseline=settings.baseline_path,
            baseline_run_id=self.base.run_id,
            alpha=settings.alpha,
            margin=settings.margin,
            family_size=self.design.family,
            looks=list(self.design.looks),
            look_confidence=min(confidences, default=1.0 - settings.alpha),
            futility=FUTILITY,
            min_trials=self.design.looks[0],
            max_trials=self.design.looks[-1],
            new_trials=settings.fixed_count,
            max_cost=settings.max_cost,
            cost=round(sum(t.cost or 0.0 for t in report.all_trials()), 6),
            scenarios=scenarios,
            trials_used=used,
            fixed_per_scenario=per_scenario,
            fixed_trials=fixed,
            saving=fixed - used,
            compare_agrees=agrees,
            overall=_overall(compared.overall),
        )

    def decorate(self, report: RunReport) -> RunReport:
        """Add the decision record to the report about to be published."""
        return decorated(report, self.record)

    def _fixed(self, track: _Track, ran: int) -> int | None:
        """Trials a fixed-count run needs for the same decision (``ran`` when none is claimed)."""
        if track.base is None:
            return self.settings.fixed_count
        return track.fixed(track.base, ran, settings=self.settings, family=self.design.family)


def _overall(row: Comparison | None) -> AdaptiveOverall | None:
    """``compare``'s stratified overall row, when it is more than one scenario's row."""
    if row is None or row.strata is None or row.strata < 2:
        return None
    return AdaptiveOverall(
        base_rate=row.base.pass_rate,
        head_rate=row.head.pass_rate,
        difference=row.difference,
        interval=row.difference_interval,
        p_value=row.p_value,
        adjusted_p=row.adjusted_p,
        verdict=row.verdict,
        scenarios=row.strata,
    )
