"""``run_eval``: validate, plan, run every trial, publish the report.

This is the whole run as a library call. The CLI is a thin layer over
:func:`execute_run`; Python users call :func:`run_eval`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from .._util.logs import bind_context, get_logger, unbind_context
from .._util.paths import display_path
from .._version import __version__
from ..choices import SELFTEST_HOST
from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from ..hosts import Host, HostError, create_host, model_endpoints
from ..isolation.preflight import preflight_isolation
from ..isolation.trial import IsolationSettings
from ..project import (
    Plan,
    PlannedTrial,
    ProjectWatch,
    Scenario,
    Suite,
    budget_skips,
    definition_digest,
    load_suite,
    make_plan,
    model_diagnostics,
    modified_cause,
    plan_digest,
    resolve_budget,
    scenario_fingerprint,
    watch_run_inputs,
)
from ..report import (
    DiagnosticNotice,
    Meta,
    MetaConfig,
    ProgressEvent,
    RunFiles,
    RunFinished,
    RunReport,
    RunStarted,
    ScenarioFinished,
    ScenarioResult,
    ScenarioStarted,
    TrialFinished,
    TrialResult,
    TrialStarted,
    load_report,
    report_base,
    tampering_warning,
    utc_timestamp,
)
from ..transcript import copy_trial_files, recorded_activity
from .balance import ShardSplit, shard_split
from .engine import Engine, EngineOptions, TrialGuard, call_sink
from .journal import JOURNAL_NAME, Journal, JournalError, lock_for_resume, read_journal
from .lifecycle import ActiveRun, cleanup_warning, run_lifecycle
from .limits import DESCRIPTORS_PER_JOB, jobs_for_descriptors, raise_nofile_limit
from .options import DEFAULT_JOBS, RunOptions, run_options
from .summary import scenario_result

if TYPE_CHECKING:
    from .adaptive import AdaptiveDriver, AdaptiveSettings

__all__ = [
    "DEFAULT_JOBS",
    "EvalRunError",
    "RunControl",
    "RunOptions",
    "RunOutcome",
    "execute_run",
    "run_eval",
]

log = get_logger("atlante_eval.run")

ProgressCallback = Callable[[ProgressEvent], object]


class EvalRunError(DiagnosticError):
    """Raised by :func:`run_eval` when a run stopped part-way (exit 3).

    A partial report with every finished trial was still published: ``report`` and
    ``report_path`` say where.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic], report: RunReport, path: Path) -> None:
        super().__init__(diagnostics)
        self.report = report
        self.report_path = path


@dataclass
class RunControl:
    """Lets a caller interrupt a running run (the CLI does on SIGINT/SIGTERM)."""

    _scope: anyio.CancelScope | None = None
    interrupted: bool = False

    def interrupt(self) -> None:
        """Stop starting trials, cancel running ones and publish a partial report."""
        self.interrupted = True
        if self._scope is not None:
            self._scope.cancel()


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A published run: the report, where it is, and the warnings met on the way."""

    report: RunReport
    path: Path
    warnings: tuple[Diagnostic, ...] = field(default=())
    html: Path | None = None
    """The run's ``report.html``, when it was written."""


@dataclass
class _Progress:
    """Records finished trials and turns them into scenario events."""

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

    def expected(self, name: str) -> int:
        return sum(1 for p in self.positions if self.plan.trials[p].scenario.name == name)

    async def emit(self, event: ProgressEvent) -> None:
        if isinstance(event, TrialStarted):
            await self._scenario_started(event.scenario)
        await call_sink(self.sink, event)

    async def _scenario_started(self, name: str) -> None:
        if name not in self.started:
            self.started.add(name)
            await call_sink(self.sink, ScenarioStarted(name))

    async def trial_done(self, planned: PlannedTrial, result: TrialResult) -> None:
        self.results[planned.position] = result
        name = planned.scenario.name
        if self.journal is not None:
            await anyio.to_thread.run_sync(
                self.journal.record, name, planned.index, self.fingerprints.get(name), result
            )
        await self._scenario_started(name)
        self.done[name] = self.done.get(name, 0) + 1
        await call_sink(self.sink, TrialFinished(name, planned.index, result))
        if self.announce and self.done[name] == self.expected(name):
            await self.scenario_finished(planned.scenario)

    async def scenario_finished(self, scenario: Scenario) -> None:
        """Emit ScenarioFinished with the scenario's trials so far."""
        name = scenario.name
        trials = [
            self.results[p]
            for p in self.positions
            if self.plan.trials[p].scenario.name == name and p in self.results
        ]
        await call_sink(
            self.sink,
            ScenarioFinished(
                name,
                scenario_result(
                    scenario,
                    trials,
                    fingerprint=self.fingerprints.get(name),
                    definition=self.definitions.get(name),
                ),
            ),
        )


def _scenarios(
    plan: Plan, progress: _Progress, *, interrupted: bool, run_files: RunFiles | None = None
) -> dict[str, ScenarioResult]:
    by_name: dict[str, list[TrialResult]] = {}
    for position in progress.positions:
        planned = plan.trials[position]
        result = progress.results.get(position)
        if result is None:
            recorded = (
                recorded_activity(run_files, planned.scenario.name, planned.index)
                if run_files is not None
                else None
            )
            result = TrialResult(
                i=planned.index,
                verdict="infra-error",
                duration_ms=0,
                error="the run was interrupted before this trial finished"
                if interrupted
                else "the run stopped before this trial finished",
                transcript=recorded[0] if recorded else None,
                activity=recorded[1] if recorded else None,
            )
        by_name.setdefault(planned.scenario.name, []).append(result)
    return {
        scenario.name: scenario_result(
            scenario,
            by_name[scenario.name],
            fingerprint=progress.fingerprints.get(scenario.name),
            definition=progress.definitions.get(scenario.name),
        )
        for scenario in plan.scenarios
        if scenario.name in by_name
    }


def _leaves(failure: BaseException) -> list[BaseException]:
    """The exceptions inside task-group wrappers, depth first (``failure`` itself if none)."""
    if not isinstance(failure, BaseExceptionGroup):
        return [failure]
    return [leaf for inner in failure.exceptions for leaf in _leaves(inner)]


def _cause(failure: BaseException) -> str:
    """``Type: message`` of the error that stopped a run, unwrapping task-group wrappers.

    Concurrent trials can raise the same error more than once before the run is
    cancelled; identical errors count once, and distinct ones after the first are counted.
    """
    causes = list(dict.fromkeys(f"{type(leaf).__name__}: {leaf}" for leaf in _leaves(failure)))
    if len(causes) == 1:
        return causes[0]
    return f"{causes[0]} (and {len(causes) - 1} other error(s))"


def _journal_failure(failure: BaseException | None) -> JournalError | None:
    """The journal write that stopped the run, if that is what stopped it."""
    pending = [failure] if failure is not None else []
    while pending:
        current = pending.pop()
        if isinstance(current, JournalError):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return None


def _journal_diagnostic(exc: JournalError, report_path: Path | None, run_dir: Path) -> Diagnostic:
    """``eval-journal-failed``: what the journal failure did to the run and to its report."""
    if report_path is None:
        outcome = "the report could not be published either (see below)"
        step = "free space on the report's file system (or choose --out elsewhere) and run again"
    else:
        outcome = f"a partial report with the finished trials was published at {report_path}"
        step = f"free space on the report's file system, then run again with --resume {run_dir}"
    return error(
        "eval-journal-failed",
        f"the run was stopped because a finished trial could not be recorded in the journal "
        f"({exc.cause.strerror or exc.cause}); {outcome}",
        source=display_path(run_dir),
        cause=str(exc),
        next=step,
    )


def _with_journal_cause(
    exc: DiagnosticError, failure: BaseException | None, run_dir: Callable[[], Path]
) -> DiagnosticError:
    """``exc``, led by ``eval-journal-failed`` when a journal failure kept the report out.

    ``run_dir`` is asked only then: before the run directory is reserved there is none.
    """
    journal_failure = _journal_failure(failure)
    if journal_failure is None or not any(d.code == "eval-report-failed" for d in exc.diagnostics):
        return exc
    first = _journal_diagnostic(journal_failure, None, run_dir())
    return DiagnosticError([first, *exc.diagnostics])


def _late_notices(run: ActiveRun, watch: ProjectWatch, project_root: Path) -> list[Diagnostic]:
    """The warnings known once the report is out: leftovers, tampering, a modified project."""
    notes: list[Diagnostic] = []
    left_behind = cleanup_warning(run.cleanup_failures)
    if left_behind is not None:
        notes.append(left_behind)
    if run.report_dir.tampered:
        notes.append(tampering_warning(run.run_dir, run.report_dir.tampered))
    modified = watch.changed()
    if modified:
        notes.append(_modified_warning(project_root, modified))
    return notes


def _fit_jobs(options: RunOptions, notices: list[Diagnostic]) -> RunOptions:
    """Raise the descriptor limit; run fewer jobs when it is still too low, noting why."""
    limit = raise_nofile_limit()
    jobs = jobs_for_descriptors(options.jobs, limit)
    if jobs >= options.jobs:
        return options
    note = warning(
        "jobs-limited",
        f"--jobs {options.jobs} needs about {options.jobs * DESCRIPTORS_PER_JOB} open files, "
        f"but only {limit} are allowed (ulimit -n): running {jobs} jobs at once",
        next="raise the hard limit (ulimit -Hn, or LimitNOFILE= in a service) or lower --jobs",
    )
    notices.append(note)
    return options.model_copy(update={"jobs": jobs})


def _guard(watch: ProjectWatch) -> TrialGuard:
    """Refuse a trial whose documents, fixture or native outputs changed in the project."""

    async def guard(planned: PlannedTrial) -> str | None:
        await watch.refresh()
        changed = watch.affecting(planned.scenario.name)
        return modified_cause(changed) if changed else None

    return guard


def _modified_warning(project_root: Path, changed: Sequence[str]) -> Diagnostic:
    """The run-level ``eval-project-modified`` warning."""
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return warning(
        "eval-project-modified",
        f"the project was modified during the run: {shown}; trials that would have used "
        "the changed files were not run (infra-error)",
        source=display_path(project_root),
        next="restore those files (e.g. `git status` / `git checkout` in the project); an agent "
        "may be writing outside its sandbox (see docs/reliability.md)",
    )


def _last_failed(
    suite: Suite, options: RunOptions
) -> tuple[tuple[Scenario, ...], Diagnostic | None]:
    """Scenarios that did not fully pass in the newest real run under the report base.

    Selftest reports (``meta.host`` ``"selftest"``) are skipped: their null agent
    always fails, so taking one would rerun the whole suite.
    """
    base = report_base(suite.project.root, options.out)
    loaded: list[tuple[str, str, Path, RunReport]] = []
    for candidate in sorted(base.glob("*/report.json")) if base.is_dir() else []:
        try:
            report = load_report(candidate)  # bounded: a FIFO or /dev/zero is skipped
        except DiagnosticError:
            continue
        # Run ids have one-second resolution: order by the recorded start time first.
        loaded.append((report.meta.started_at or "", candidate.parent.name, candidate, report))
    skipped = 0
    for _started, _name, candidate, previous in sorted(loaded, reverse=True):
        if previous.meta.host == SELFTEST_HOST:
            skipped += 1
            continue
        failed = {
            name
            for name, result in previous.scenarios.items()
            if any(t.verdict != "pass" for t in result.trials)
        }
        chosen = tuple(s for s in suite.scenarios if s.name in failed)
        names = ", ".join(s.name for s in chosen) or "none"
        note = warning(
            "last-failed",
            f"--last-failed: took run {previous.run_id} ({candidate}); "
            f"{len(chosen)} scenario(s) did not fully pass there: {names}"
            + (f" ({_skipped(skipped)})" if skipped else ""),
            source=str(candidate),
        )
        return chosen, note
    note = warning(
        "last-failed",
        "--last-failed: no earlier run found"
        + (f" ({_skipped(skipped)})" if skipped else "")
        + "; running every selected scenario",
        source=str(base),
    )
    return suite.scenarios, note


def _budget_notes(
    plan: Plan, positions: list[int], reused: Mapping[int, TrialResult], *, adaptive: bool
) -> list[Diagnostic]:
    """The maxSessions warning when the plan asks for more sessions than it allows."""
    skips = 0 if adaptive else budget_skips(plan, positions, reused)
    return [_budget_warning(plan, len(positions), skips)] if skips else []


def _budget_warning(plan: Plan, planned: int, skips: int) -> Diagnostic:
    """``eval-sessions-exceed-budget``: how many trials maxSessions will skip."""
    limit = plan.config.max_sessions
    return warning(
        "eval-sessions-exceed-budget",
        f"{skips} of {planned} trial(s) will be skipped-budget: the plan needs "
        f"{len(plan.trials)} host sessions and eval.budget.maxSessions allows {limit}",
        next=f"raise eval.budget.maxSessions to {len(plan.trials)}, "
        "or run fewer trials (--trials, --scenario)",
    )


def _skipped(count: int) -> str:
    return f"skipped {count} newer selftest report{'s' if count != 1 else ''}"


def _check_pass_env(host: Host, names: Sequence[str]) -> None:
    """Refuse, before any trial, ``--pass-env`` names the host would refuse per trial."""
    if not names:
        return
    try:
        host.check_pass_env(list(names))
    except HostError as exc:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    str(exc),
                    next="remove that --pass-env name; see docs/hosts.md for the supported ones",
                )
            ]
        ) from None


def _fingerprints(
    plan: Plan, suite: Suite, host: Host, model: str | None, watch: ProjectWatch
) -> tuple[dict[str, str], dict[str, str]]:
    """Snapshot the project's inputs; each scenario's fingerprint and definition digest.

    The fingerprint (for --resume) and the definition digest (for compare) reuse the
    snapshot's file digests: each fixture file is read once.
    """
    assert suite.native is not None
    watch.snapshot()
    timeouts = {t.scenario.name: t.timeout_ms for t in plan.trials}
    definitions = {
        scenario.name: definition_digest(scenario, fixture=watch.tree_digest(scenario.fixture_path))
        for scenario in plan.scenarios
    }
    fingerprints = {
        scenario.name: scenario_fingerprint(
            scenario,
            manifest_digest=suite.native.digest,
            host=host.name,
            host_version=host.version,
            model=model,
            timeout_ms=timeouts.get(scenario.name, plan.config.timeout_ms),
            max_tokens=plan.config.max_tokens,
            definition=definitions[scenario.name],
        )
        for scenario in plan.scenarios
    }
    return fingerprints, definitions


def _reusable(
    run_dir: Path, plan: Plan, fingerprints: Mapping[str, str], positions: list[int]
) -> dict[int, TrialResult]:
    """Trials of an earlier run that may stand: same fingerprint, a real verdict."""
    entries = {(e.scenario, e.index): e for e in read_journal(run_dir)}
    reused: dict[int, TrialResult] = {}
    for position in positions:
        planned = plan.trials[position]
        entry = entries.get((planned.scenario.name, planned.index))
        if entry is None or entry.fingerprint != fingerprints[planned.scenario.name]:
            continue
        if entry.result.verdict in ("infra-error", "skipped-budget"):
            continue
        reused[position] = entry.result.model_copy(update={"reused": True})
    return reused


async def _announce(
    on_event: ProgressCallback | None, notes: Sequence[Diagnostic]
) -> Sequence[Diagnostic]:
    """Send each diagnostic to the progress callback as a notice; return them."""
    for note in notes:
        await call_sink(on_event, DiagnosticNotice(note))
    return notes


def _selection(suite: Suite, options: RunOptions) -> tuple[tuple[Scenario, ...], list[Diagnostic]]:
    """The scenarios to run (``--last-failed`` applied) and the warnings found so far."""
    notices = list(suite.warnings)
    if not options.last_failed:
        return suite.scenarios, notices
    selected, note = _last_failed(suite, options)
    if note is not None:
        notices.append(note)
    return selected, notices


async def _budget(suite: Suite, options: RunOptions) -> tuple[MetaConfig, AdaptiveSettings | None]:
    """The run's budget, raised to ``--until-decided``'s most trials when that is on."""
    budget = resolve_budget(suite.project.eval.budget, trials=options.trials)
    if not options.until_decided:
        return budget, None
    # Only an adaptive run needs the driver (and comparison, the sequential design with it).
    from .adaptive import settings_from_options

    settings = await anyio.to_thread.run_sync(settings_from_options, options, budget.trials)
    trials = max(settings.max_trials, budget.trials)
    return budget.model_copy(update={"trials": trials}), settings


async def _ready_host(
    host: Host | None, suite: Suite, options: RunOptions
) -> tuple[Host, str | None]:
    """The run's host (the given one, or the configured built-in), probed and checked.

    First, under ``--isolation os``, the preflight: the proven ``bwrap`` is returned
    with the host (``None`` for ``none``).
    """
    bwrap = await preflight_isolation(options.isolation or suite.project.eval.isolation)
    chosen = host if host is not None else create_host(suite.project.eval.host)
    await chosen.probe()
    _check_pass_env(chosen, options.pass_env)
    return chosen, bwrap


def _model_notes(host: Host, model: str | None) -> list[Diagnostic]:
    """Warnings about ``eval.model`` for this host.

    Raises:
        DiagnosticError: the model cannot work with this host (exit 2).
    """
    notes = model_diagnostics(host.name, model, getattr(host, "dialect", None))
    if any(d.severity == "error" for d in notes):
        raise DiagnosticError(notes)
    return notes


def _positions(
    plan: Plan, options: RunOptions, fingerprints: Mapping[str, str], split: ShardSplit | None
) -> tuple[list[int], dict[int, TrialResult]]:
    """The plan positions this run owns (``--shard``) and those ``--resume`` reuses."""
    positions = [t.position for t in plan.trials] if split is None else list(split.positions)
    if options.resume is None:
        return positions, {}
    return positions, _reusable(options.resume, plan, fingerprints, positions)


async def _owned(
    plan: Plan,
    options: RunOptions,
    fingerprints: Mapping[str, str],
    on_event: ProgressCallback | None,
    notices: list[Diagnostic],
) -> tuple[ShardSplit | None, list[int], dict[int, TrialResult]]:
    """The shard's split (announcing its warnings), its positions and the reused trials."""
    split = await anyio.to_thread.run_sync(shard_split, plan, options)
    notices.extend(await _announce(on_event, split.notices if split is not None else ()))
    return split, *_positions(plan, options, fingerprints, split)


def _meta(
    suite: Suite,
    host: Host,
    plan: Plan,
    options: RunOptions,
    digest: str,
    bwrap: str | None,
    split: ShardSplit | None = None,
) -> Meta:
    """The run's metadata before it starts (the lifecycle adds the end)."""
    assert suite.native is not None
    config = suite.project.eval
    return Meta(
        atlante=__version__,
        host=host.name,
        model=config.model or "unknown",
        model_version="unknown",
        config=plan.config,
        host_version=host.version,
        started_at=utc_timestamp(),
        jobs=options.jobs,
        manifest_digest=suite.native.digest,
        plan_digest=digest,
        shard=str(options.shard) if options.shard is not None else None,
        shard_balance=split.record if split is not None else None,
        resumed_from=display_path(options.resume) if options.resume is not None else None,
        isolation="os" if bwrap is not None else None,
    )


async def _begin(
    run: ActiveRun,
    progress: _Progress,
    options: RunOptions,
    reused: Mapping[int, TrialResult],
    *,
    digest: str,
    host: str,
) -> Journal:
    """Open the run's journal, bring over reused trials' files, and log the start.

    Raises:
        DiagnosticError: ``eval-journal-failed`` when the journal cannot be created.
    """
    try:
        journal = Journal(run.run_dir, run_id=run.run_id, plan_digest=digest)
    except JournalError as exc:
        raise DiagnosticError([_journal_diagnostic(exc, None, run.run_dir)]) from None
    progress.journal = journal
    progress.run_files = run.files
    run.report_dir.adopt(JOURNAL_NAME)
    if options.resume is not None and reused:
        # Reused trials keep their transcripts: the report's paths are relative to this run.
        plan = progress.plan
        await anyio.to_thread.run_sync(
            copy_trial_files,
            Path(options.resume),
            run.files,
            [(plan.trials[p].scenario.name, plan.trials[p].index) for p in sorted(reused)],
        )
    bind_context(run_id=run.run_id, host=host)
    log.info("run.start", trials=len(progress.positions), reused=len(reused), jobs=options.jobs)
    return journal


def _engine(
    plan: Plan,
    suite: Suite,
    host: Host,
    options: RunOptions,
    progress: _Progress,
    reused: Mapping[int, TrialResult],
    run: ActiveRun,
    watch: ProjectWatch,
    bwrap: str | None,
) -> Engine:
    """The engine of one run, reporting to ``progress``, refusing trials whose inputs changed.

    ``bwrap`` is the proven bubblewrap for ``--isolation os`` (``None``: ``none``).
    """
    assert suite.native is not None
    allow = suite.project.eval.network.allow
    isolation = (
        IsolationSettings.build(bwrap, model_endpoints(host), allow) if bwrap is not None else None
    )
    return Engine(
        plan=plan,
        host=host,
        native=suite.native,
        run_root=run.run_root,
        options=EngineOptions(
            jobs=options.jobs,
            keep=options.keep,
            model=suite.project.eval.model,
            pass_env=options.pass_env,
            retry_infra=options.retry_infra,
            project_root=suite.project.root,
            run_files=run.files,
            isolation=isolation,
        ),
        emit=progress.emit,
        on_trial=progress.trial_done,
        preset_sessions=dict.fromkeys(reused, True),
        cleanup_failures=run.cleanup_failures,
        guard=_guard(watch),
    )


async def _drive(
    engine: Engine,
    *,
    control: RunControl,
    on_event: ProgressCallback | None,
    started: RunStarted,
    progress: _Progress,
    reused: Mapping[int, TrialResult],
    pending: list[int],
    driver: AdaptiveDriver | None,
) -> BaseException | None:
    """Run the engine under the caller's interrupt; return the error that stopped it, if any."""
    with anyio.CancelScope() as scope:
        control._scope = scope
        if control.interrupted:
            scope.cancel()
        try:
            await call_sink(on_event, started)
            if driver is not None:
                from .adaptive import run_adaptive

                await run_adaptive(driver, engine, progress, dict(reused))
            else:
                for position, result in sorted(reused.items()):
                    await progress.trial_done(engine.plan.trials[position], result)
                await engine.run(pending)
        except Exception as exc:  # noqa: BLE001 - turned into eval-run-failed by the caller
            return exc
    return None


def _stopped_error(
    failure: BaseException | None,
    interrupted: bool,
    report: RunReport,
    report_path: Path,
    run_dir: Path,
) -> EvalRunError | None:
    """The error of a run that stopped part-way (its partial report is published)."""
    journal_failure = _journal_failure(failure)
    if journal_failure is not None:
        return EvalRunError(
            [_journal_diagnostic(journal_failure, report_path, run_dir)], report, report_path
        )
    if failure is not None:
        return EvalRunError(
            [
                error(
                    "eval-run-failed",
                    "the run stopped on an unexpected error; a partial report was published",
                    source=str(report_path),
                    cause=_cause(failure),
                    next="fix the cause and run again (or --resume the run directory)",
                )
            ],
            report,
            report_path,
        )
    if interrupted:
        return EvalRunError(
            [
                error(
                    "eval-run-interrupted",
                    "the run was interrupted; finished trials were kept in a partial report",
                    source=str(report_path),
                    next=f"run again with --resume {run_dir} to complete the missing trials",
                )
            ],
            report,
            report_path,
        )
    return None


async def execute_run(
    path: Path | str | None = None,
    options: RunOptions | None = None,
    *,
    host: Host | None = None,
    on_event: ProgressCallback | None = None,
    control: RunControl | None = None,
) -> RunOutcome:
    """Run an evaluation and publish its report; see :func:`run_eval` for the options.

    Raises:
        DiagnosticError: validation (exit 2) or a run-level problem (exit 3), e.g.
            ``eval-resume-busy`` when another run resumes the same directory.
        EvalRunError: the run stopped part-way; a partial report was published.
    """
    options = options or RunOptions()
    lock = lock_for_resume(options.resume) if options.resume is not None else None
    try:
        return await _execute_run(path, options, host=host, on_event=on_event, control=control)
    finally:
        if lock is not None:
            lock.close()


def _driver(
    settings: AdaptiveSettings | None, plan: Plan, definitions: Mapping[str, str]
) -> AdaptiveDriver | None:
    """The adaptive driver of an ``--until-decided`` run (imported only then)."""
    if settings is None:
        return None
    from .adaptive import AdaptiveDriver

    return AdaptiveDriver(settings, plan.scenarios, definitions)


async def _execute_run(
    path: Path | str | None,
    options: RunOptions,
    *,
    host: Host | None,
    on_event: ProgressCallback | None,
    control: RunControl | None,
) -> RunOutcome:
    suite = load_suite(path, scenario_filter=list(options.scenarios))
    selected, notices = _selection(suite, options)
    options = _fit_jobs(options, notices)
    await _announce(on_event, notices)
    config = suite.project.eval
    budget, settings = await _budget(suite, options)
    runner_host, bwrap = await _ready_host(host, suite, options)
    notices.extend(await _announce(on_event, _model_notes(runner_host, config.model)))
    plan = make_plan(selected, budget)
    watch = watch_run_inputs(suite.project.root, plan.scenarios, suite.native)
    fingerprints, definitions = await anyio.to_thread.run_sync(
        _fingerprints, plan, suite, runner_host, config.model, watch
    )
    digest = plan_digest(plan, fingerprints)
    split, positions, reused = await _owned(plan, options, fingerprints, on_event, notices)
    driver = _driver(settings, plan, definitions)
    notices.extend(await _announce(on_event, driver.notices() if driver is not None else []))
    await _announce(on_event, _budget_notes(plan, positions, reused, adaptive=driver is not None))
    control = control or RunControl()
    progress = _Progress(
        plan,
        positions if driver is None else [],
        on_event,
        fingerprints,
        definitions,
        announce=driver is None,
    )
    failure: BaseException | None = None

    async def finish() -> dict[str, object]:
        await watch.refresh()  # the end check: what changed since the last trial's
        return {"project_modified": watch.changed() or None}

    async def on_end(run: ActiveRun) -> None:
        nonlocal failure
        log.info("run.end", interrupted=run.stopped, report=str(run.report_path))
        try:
            late = _late_notices(run, watch, suite.project.root)
            notices.extend(await _announce(on_event, late))
            await call_sink(on_event, RunFinished(run.run_id, run.stopped))
        except Exception as exc:  # noqa: BLE001 - the report is out; still an eval-run-failed
            failure = failure or exc
        unbind_context("run_id", "host")

    try:
        async with run_lifecycle(
            project_root=suite.project.root,
            out=options.out,
            meta=_meta(suite, runner_host, plan, options, digest, bwrap, split),
            keep=options.keep,
            results=lambda stopped: _scenarios(
                plan, progress, interrupted=stopped, run_files=progress.run_files
            ),
            on_end=on_end,
            decorate=driver.decorate if driver is not None else _decorate(split),
            finish=finish,
        ) as run:
            journal = await _begin(
                run, progress, options, reused, digest=digest, host=runner_host.name
            )
            engine = _engine(plan, suite, runner_host, options, progress, reused, run, watch, bwrap)
            try:
                started = RunStarted(
                    run.run_id, len(positions), options.jobs, runner_host.name, plan.config
                )
                failure = await _drive(
                    engine,
                    control=control,
                    on_event=on_event,
                    started=started,
                    progress=progress,
                    reused=reused,
                    pending=[p for p in positions if p not in reused],
                    driver=driver,
                )
            finally:
                journal.close()
            run.stopped = control.interrupted or failure is not None
    except DiagnosticError as exc:
        raise _with_journal_cause(exc, failure, lambda: run.run_dir) from None
    report, report_path = _published(run)
    run_dir = run.run_dir
    html = await _publish_html(run, notices, on_event) if options.html else None
    stopped = _stopped_error(failure, control.interrupted, report, report_path, run_dir)
    if stopped is not None:
        raise stopped
    return RunOutcome(report=report, path=report_path, warnings=tuple(notices), html=html)


def _decorate(split: ShardSplit | None) -> Callable[[RunReport], RunReport] | None:
    """Add a balanced shard's wall time to its ``meta.shardBalance`` (``None``: nothing to add)."""
    return split.decorate if split is not None and split.record is not None else None


def _published(run: ActiveRun) -> tuple[RunReport, Path]:
    """The report the lifecycle published on the way out, and where."""
    assert run.report is not None
    assert run.report_path is not None
    return run.report, run.report_path


HTML_FILE = "report.html"


async def _publish_html(
    run: ActiveRun, notices: list[Diagnostic], on_event: ProgressCallback | None
) -> Path | None:
    """Publish ``report.html`` into the run directory; a failure is a warning, not a lost run."""
    from ..views.formats import RUN_REPORT_WRITERS, PublishedReport

    report = run.report
    assert report is not None

    def publish() -> Path:
        source = PublishedReport(report, run_dir=run.run_dir, links_from=run.run_dir)
        return run.publish(HTML_FILE, RUN_REPORT_WRITERS["html"].render(source))

    try:
        return await anyio.to_thread.run_sync(publish)
    except DiagnosticError as exc:
        for problem in exc.diagnostics:
            note = warning(
                problem.code,
                f"report.html not written: {problem.message}",
                source=problem.source,
                next=problem.next,
            )
            notices.append(note)
            await call_sink(on_event, DiagnosticNotice(note))
        return None


async def run_eval(
    path: Path | str | None = None,
    *,
    scenarios: Sequence[str] | None = None,
    trials: int | None = None,
    jobs: int | None = None,
    out: Path | str | None = None,
    keep: bool = False,
    host: Host | None = None,
    pass_env: Sequence[str] = (),
    retry_infra: int = 0,
    resume: Path | str | None = None,
    shard: str | None = None,
    balance: str = "round-robin",
    balance_from: Path | str | None = None,
    last_failed: bool = False,
    against: Path | str | None = None,
    until_decided: bool = False,
    min_trials: int | None = None,
    max_trials: int | None = None,
    max_cost: float | None = None,
    margin: float | None = None,
    alpha: float | None = None,
    html: bool = True,
    isolation: str | None = None,
    on_event: ProgressCallback | None = None,
) -> RunReport:
    """Evaluate the harness of the project at ``path`` and return the published report.

    Args:
        path: project directory or its ``atlante.jsonc``/``atlante.json`` (default: cwd).
        scenarios: run only these scenario names (glob patterns allowed).
        trials: trials per scenario (1-50), overriding ``eval.budget.trials``.
        jobs: trials run concurrently (default :data:`DEFAULT_JOBS`).
        out: report base directory instead of ``<project>/.atlante/eval``.
        keep: keep the trial sandboxes (their paths are recorded in the report).
        host: a host to use instead of the configured one (tests, custom hosts).
        pass_env: names of environment variables to hand to the host session.
        retry_infra: rerun a trial up to this many times while it ends in infra-error.
        resume: an earlier run directory; its trials whose fingerprint still matches
            are reused (infra-errors never are).
        shard: ``"I/N"``: run only the I-th of N slices of the plan.
        balance: ``"round-robin"`` (default) or ``"duration"``: slice the plan so that
            every shard is expected to take about as long, by the trial durations of
            ``balance_from`` (see docs/scaling.md).
        balance_from: the earlier report (or its run directory) ``"duration"`` reads;
            every shard must read the same one.
        last_failed: run only scenarios that did not fully pass in the previous report.
        against: a baseline report (or its run directory) for ``until_decided``.
        until_decided: run adaptively: add trials to scenarios whose comparison with
            ``against`` is undecided until decided, ``max_trials``, the session budget
            or ``max_cost`` (see docs/statistics.md, "Adaptive runs"). The report's
            ``adaptive`` field holds the decision record.
        min_trials: adaptive runs: trials at the first look (default ``trials``).
        max_trials: adaptive runs: most trials per scenario (default 50).
        max_cost: adaptive runs: add no wave once the host-reported cost reaches it (USD).
        margin: adaptive runs: largest change counted as unchanged (default 0.1).
        alpha: adaptive runs: error rate over all looks (default 0.05).
        html: also write ``report.html`` (a self-contained page) beside ``report.json``.
        isolation: ``"none"`` or ``"os"`` (see docs/isolation.md), overriding
            ``eval.isolation``; ``os`` fails before any trial when unavailable.
        on_event: called (sync or async) with each progress event.

    Raises:
        DiagnosticError: validation failed (``exit_code`` 2) or the run could not
            start (3).
        EvalRunError: the run stopped part-way; ``.report`` holds the partial report.
    """
    options = run_options(
        scenarios=scenarios,
        trials=trials,
        jobs=jobs,
        out=Path(out) if out is not None else None,
        keep=keep,
        pass_env=pass_env,
        retry_infra=retry_infra,
        resume=Path(resume) if resume is not None else None,
        shard=shard,
        balance=balance,
        balance_from=Path(balance_from) if balance_from is not None else None,
        last_failed=last_failed,
        against=Path(against) if against is not None else None,
        until_decided=until_decided,
        min_trials=min_trials,
        max_trials=max_trials,
        max_cost=max_cost,
        margin=margin,
        alpha=alpha,
        html=html,
        isolation=isolation,
    )
    outcome = await execute_run(path, options, host=host, on_event=on_event)
    return outcome.report
