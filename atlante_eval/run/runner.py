"""``run_eval``: validate, plan, run every trial, publish the report.

This is the whole run as a library call. The CLI is a thin layer over
:func:`execute_run`; Python users call :func:`run_eval`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from .._util.logs import bind_context, get_logger, unbind_context
from .._util.memory import release_free_memory
from .._util.paths import display_path
from .._version import __version__
from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from ..hosts import Host
from ..hosts.base import secret_values
from ..project import PlannedTrial, ProjectWatch, modified_cause
from ..project.config import Project, load_project
from ..report import (
    DiagnosticNotice,
    Meta,
    RunFinished,
    RunReport,
    RunStarted,
    TrialResult,
    tampering_warning,
    utc_timestamp,
)
from ..report.state_files import carry_trial_states
from ..transcript import Redactor, copy_trial_files
from .arms import arm_infos
from .balance import ShardSplit
from .engine import Engine, EngineOptions, TrialGuard, call_sink
from .failures import cause, journal_diagnostic, journal_failure, with_journal_cause
from .journal import JOURNAL_NAME, Journal, lock_for_resume
from .lifecycle import ActiveRun, JournalSeed, cleanup_warning, run_lifecycle
from .metering import GatewayRun, gateway_notice, run_gateway, with_gateway
from .options import DEFAULT_JOBS, RunOptions, options_from_keywords
from .prepare import PreparedRun, ProgressCallback, announce, prepare_run
from .prewarm import end_modules, end_prewarm
from .record import Recording, RecordOutcome, record_run, recording_for
from .recorder import RecorderProcess
from .tracking import RunProgress, scenario_results

if TYPE_CHECKING:
    from .waves import WaveDriver

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
    history: RecordOutcome | None = None
    """What recording the run in the history did (``RunOptions.history``)."""


def _late_notices(
    run: ActiveRun, watch: ProjectWatch, project_root: Path, gateway: GatewayRun | None = None
) -> list[Diagnostic]:
    """The warnings known once the report is out: leftovers, tampering, a modified project,
    trials the gateway could not meter."""
    notes: list[Diagnostic] = []
    fallback = gateway_notice(gateway)
    if fallback is not None:
        notes.append(fallback)
    left_behind = cleanup_warning(run.cleanup_failures)
    if left_behind is not None:
        notes.append(left_behind)
    if run.report_dir.tampered:
        notes.append(tampering_warning(run.run_dir, run.report_dir.tampered))
    modified = watch.changed()
    if modified:
        notes.append(_modified_warning(project_root, modified))
    return notes


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


def _meta(ready: PreparedRun) -> Meta:
    """The run's metadata before it starts (the lifecycle adds the end).

    With arms, the seed fields (host version, model, harness digest) are the control's.
    """
    suite, options = ready.suite, ready.options
    assert suite.native is not None
    control = next((s for s in ready.arms.values() if s.arm.control), None)
    model = control.model if control is not None else suite.project.eval.model
    return Meta(
        atlante=__version__,
        host=ready.host.name,
        model=model or "unknown",
        model_version="unknown",
        config=ready.plan.config,
        host_version=(control.host if control is not None else ready.host).version,
        host_source=control.host_source if control is not None else ready.host_source,
        started_at=utc_timestamp(),
        jobs=options.jobs,
        manifest_digest=(control.native if control is not None else suite.native).digest,
        plan_digest=ready.digest,
        shard=str(options.shard) if options.shard is not None else None,
        shard_balance=ready.split.record if ready.split is not None else None,
        resumed_from=display_path(options.resume) if options.resume is not None else None,
        isolation="os" if ready.isolation is not None else None,
        limits=ready.limits.record(),
        variants=arm_infos(dict(ready.arms)) or None,
        variant_seed=ready.plan.seed,
    )


async def _begin(run: ActiveRun, progress: RunProgress, ready: PreparedRun) -> Journal:
    """Take the run's journal, bring over reused trials' files, and log the start."""
    options, reused = ready.options, ready.reused
    journal = run.journal
    assert journal is not None  # the lifecycle made it with the directory
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
            [(plan.trials[p].key, plan.trials[p].index) for p in sorted(reused)],
        )
        await anyio.to_thread.run_sync(
            carry_trial_states, Path(options.resume), run.files, list(reused.values())
        )
    bind_context(run_id=run.run_id, host=ready.host.name)
    log.info("run.start", trials=len(progress.positions), reused=len(reused), jobs=options.jobs)
    return journal


def _engine(
    ready: PreparedRun,
    progress: RunProgress,
    run: ActiveRun,
    gateway: GatewayRun | None,
    recorder: RecorderProcess | None = None,
) -> Engine:
    """The engine of one run, reporting to ``progress``, refusing trials whose inputs changed."""
    suite, options = ready.suite, ready.options
    assert suite.native is not None
    return Engine(
        plan=ready.plan,
        host=ready.host,
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
            isolation=with_gateway(ready.isolation, gateway),
            limits=ready.limits,
            gateway=gateway,
            final_state=ready.final_state(),
        ),
        emit=progress.emit,
        on_trial=progress.trial_done,
        preset_sessions=dict.fromkeys(ready.reused, True),
        cleanup_failures=run.cleanup_failures,
        guard=_guard(ready.watch),
        arms=ready.arms,
        on_session_end=end_prewarm(
            end_modules(html=options.html), recorder.start if recorder is not None else None
        ),
    )


async def _drive(
    engine: Engine,
    *,
    control: RunControl,
    on_event: ProgressCallback | None,
    started: RunStarted,
    progress: RunProgress,
    reused: Mapping[int, TrialResult],
    pending: list[int],
    driver: WaveDriver | None,
) -> BaseException | None:
    """Run the engine under the caller's interrupt; return the error that stopped it, if any."""
    with anyio.CancelScope() as scope:
        control._scope = scope
        if control.interrupted:
            scope.cancel()
        try:
            await call_sink(on_event, started)
            if driver is not None:
                from .waves import run_adaptive

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
    journal_error = journal_failure(failure)
    if journal_error is not None:
        return EvalRunError(
            [journal_diagnostic(journal_error, report_path, run_dir)], report, report_path
        )
    if failure is not None:
        return EvalRunError(
            [
                error(
                    "eval-run-failed",
                    "the run stopped on an unexpected error; a partial report was published",
                    source=str(report_path),
                    cause=cause(failure),
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
    # Read once: the suite is loaded from this project, not from ``path`` again.
    project = load_project(path) if options.history else None
    recording = recording_for(project, options) if project is not None else None
    # The store is written by a process of its own, started while sessions run (.recorder).
    recorder = (
        RecorderProcess(recording)
        if recording is not None and recording.location is not None
        else None
    )
    lock = lock_for_resume(options.resume) if options.resume is not None else None
    leases = ExitStack()  # a pinned host's hold on its managed copy, for the whole run
    if recorder is not None:
        leases.callback(recorder.close)
    try:
        try:
            outcome = await _execute_run(
                project or path,
                options,
                host=host,
                on_event=on_event,
                control=control,
                leases=leases,
                recorder=recorder,
            )
        except EvalRunError as exc:
            if recording is not None:
                await _record(recording, recorder, exc.report, exc.report_path, on_event)
            raise
        if recording is None:
            return outcome
        recorded = await _record(recording, recorder, outcome.report, outcome.path, on_event)
    finally:
        leases.close()
        if lock is not None:
            lock.close()
    return replace(outcome, history=recorded)


async def _record(
    recording: Recording,
    recorder: RecorderProcess | None,
    report: RunReport,
    report_path: Path,
    on_event: ProgressCallback | None,
) -> RecordOutcome:
    """Record the published run in the history (a thread: the store's I/O blocks)."""
    if recorder is not None:
        outcome = await anyio.to_thread.run_sync(recorder.record, report_path)
    else:  # no store (an alert without one is a warning): nothing to load
        outcome = await anyio.to_thread.run_sync(lambda: record_run(recording, report, report_path))
    for note in outcome.notes:
        await call_sink(on_event, DiagnosticNotice(note))
    return outcome


async def _execute_run(
    path: Path | str | Project | None,
    options: RunOptions,
    *,
    host: Host | None,
    on_event: ProgressCallback | None,
    control: RunControl | None,
    leases: ExitStack,
    recorder: RecorderProcess | None = None,
) -> RunOutcome:
    ready = await prepare_run(path, options, host=host, on_event=on_event, leases=leases)
    control = control or RunControl()
    progress = RunProgress(
        ready.plan,
        ready.positions if ready.driver is None else [],
        on_event,
        ready.fingerprints,
        ready.definitions,
        announce=ready.driver is None,
    )
    ending = _Ending(ready, on_event, recorder=recorder)
    try:
        async with run_lifecycle(
            project_root=ready.suite.project.root,
            out=ready.options.out,
            meta=_meta(ready),
            keep=ready.options.keep,
            results=lambda stopped: scenario_results(
                ready.plan,
                progress,
                interrupted=stopped,
                run_files=progress.run_files,
                redact=Redactor(secret_values(os.environ, pass_env=ready.options.pass_env)),
            ),
            on_end=ending.on_end,
            decorate=_decorations(ready),
            finish=ending.finish,
            journal=JournalSeed(
                ready.digest, host_version=ready.host.version, host_source=ready.host_source
            ),
        ) as run:
            ending.failure = await _run_trials(run, ready, progress, control, on_event, ending)
            run.stopped = control.interrupted or ending.failure is not None
    except DiagnosticError as exc:
        raise with_journal_cause(exc, ending.failure, lambda: run.run_dir) from None
    report, report_path = _published(run)
    if recorder is not None:  # it records while report.html is rendered
        await anyio.to_thread.run_sync(recorder.submit, report_path)
    html = await _publish_html(run, ready.notices, on_event) if ready.options.html else None
    stopped = _stopped_error(ending.failure, control.interrupted, report, report_path, run.run_dir)
    if stopped is not None:
        raise stopped
    return RunOutcome(report=report, path=report_path, warnings=tuple(ready.notices), html=html)


@dataclass
class _Ending:
    """How a run ends, as its lifecycle asks: the last project check, the late notices."""

    ready: PreparedRun
    on_event: ProgressCallback | None
    failure: BaseException | None = None
    """The error that stopped the run, or one met once the report was out."""
    gateway: GatewayRun | None = None
    """The run's model gateway, once started."""
    recorder: RecorderProcess | None = None
    """The history recorder's process, started once the first session is over."""

    async def finish(self) -> dict[str, object]:
        """The end check (what changed in the project since the last trial's check), and
        the gateway's figures."""
        await self.ready.watch.refresh()
        extra: dict[str, object] = {"project_modified": self.ready.watch.changed() or None}
        if self.gateway is not None:
            extra["gateway"] = self.gateway.summary(self.ready.reused.values())
        return extra

    async def on_end(self, run: ActiveRun) -> None:
        """Announce the late notices and the end (the report is out)."""
        log.info("run.end", interrupted=run.stopped, report=str(run.report_path))
        try:
            late = _late_notices(run, self.ready.watch, self.ready.suite.project.root, self.gateway)
            self.ready.notices.extend(await announce(self.on_event, late))
            await call_sink(self.on_event, RunFinished(run.run_id, run.stopped))
        except Exception as exc:  # noqa: BLE001 - the report is out; still an eval-run-failed
            self.failure = self.failure or exc
        unbind_context("run_id", "host")


async def _run_trials(
    run: ActiveRun,
    ready: PreparedRun,
    progress: RunProgress,
    control: RunControl,
    on_event: ProgressCallback | None,
    ending: _Ending,
) -> BaseException | None:
    """Open the journal and the gateway, then drive the engine; return the error that
    stopped it, if any."""
    journal = await _begin(run, progress, ready)
    try:
        async with run_gateway(ready.gateway) as gateway:
            ending.gateway = gateway
            return await _drive(
                _engine(ready, progress, run, gateway, ending.recorder),
                control=control,
                on_event=on_event,
                started=RunStarted(
                    run.run_id,
                    len(ready.positions),
                    ready.options.jobs,
                    ready.host.name,
                    ready.plan.config,
                ),
                progress=progress,
                reused=ready.reused,
                pending=ready.pending,
                driver=ready.driver,
            )
    finally:
        journal.close()


def _decorations(ready: PreparedRun) -> Callable[[RunReport], RunReport] | None:
    """What the lifecycle adds to the report: the adaptive record or the shard balance,
    and the uplift section of a run with arms."""
    first = ready.driver.decorate if ready.driver is not None else _decorate(ready.split)
    if not ready.arms:
        return first
    from ..report.uplift import with_uplift  # comparison: only for a run with arms

    options = ready.options  # an adaptive run's alpha and margin (else the defaults)
    if first is None:
        return lambda report: with_uplift(report, alpha=options.alpha, margin=options.margin)
    earlier = first
    return lambda report: with_uplift(earlier(report), alpha=options.alpha, margin=options.margin)


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
        # The sessions' freed memory goes back first: the page's templates and modules
        # then fit in it instead of stacking on the run's peak (docs/performance.md).
        release_free_memory()
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
    gateway: str | None = None,
    history: bool = False,
    history_url: str | None = None,
    alert_webhook: str | None = None,
    limits: Mapping[str, int | float | str] | Sequence[str] | None = None,
    host_version: str | None = None,
    variants: Sequence[str] | str | None = None,
    final_state: bool = True,
    final_state_cap: int | str | None = None,
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
        against: a baseline report (or its run directory) for ``until_decided``
            (a run without arms).
        until_decided: run adaptively: add trials to scenarios whose comparison with
            ``against`` is undecided until decided, ``max_trials``, the session budget
            or ``max_cost`` (see docs/statistics.md, "Adaptive runs"); with arms, decide
            each arm against the control arm instead (docs/variants.md). The report's
            ``adaptive`` field holds the decision record.
        min_trials: adaptive runs: trials at the first look (default ``trials``).
        max_trials: adaptive runs: most trials per scenario (default 50).
        max_cost: adaptive runs: add no wave once the host-reported cost reaches it (USD).
        margin: adaptive runs: largest change counted as unchanged (default 0.1).
        alpha: adaptive runs: error rate over all looks (default 0.05).
        html: also write ``report.html`` (a self-contained page) beside ``report.json``.
        isolation: ``"none"`` or ``"os"`` (see docs/isolation.md), overriding
            ``eval.isolation``; ``os`` fails before any trial when unavailable.
        gateway: ``"on"`` or ``"off"``, overriding ``eval.gateway`` (default on): meter
            each trial's model calls through the engine's gateway (docs/gateway.md).
        history: record the published run in the history store (``eval.history``, else
            ``.atlante/eval/history.sqlite``), alert on regressions against the blessed
            baseline and write ``$GITHUB_STEP_SUMMARY`` (docs/history.md). The CLI's
            ``run`` does this unless ``--no-history``.
        history_url: the history store instead of ``eval.history``.
        alert_webhook: POST regression alerts here instead of ``eval.alerts.webhook``.
        limits: per-trial resource limits overriding ``eval.limits`` key by key,
            e.g. ``{"memoryMb": 2048, "pids": "unlimited"}`` or ``["pids=256"]``
            (``--limit``; see docs/isolation.md#resource-limits); limits that
            cannot be enforced here fail before any trial (exit 3).
        host_version: run the host at exactly this version (``"2.1.332"``), overriding
            ``eval.hostVersion``: from the managed host cache, installed on first use
            (see docs/hosts.md, "Pinning").
        variants: the arms of ``eval.variants`` to run: a list of names, ``"all"`` or
            ``"none"`` (default: every configured arm); see docs/variants.md.
        final_state: store each graded trial's final state, so ``regrade`` can apply
            changed checks without running the trials again (docs/regrade.md).
        final_state_cap: the most content one trial's final state may refer to:
            bytes, or text such as ``"64M"`` (default 256 MiB); a trial over it
            cannot be regraded.
        on_event: called (sync or async) with each progress event.

    Raises:
        DiagnosticError: validation failed (``exit_code`` 2) or the run could not
            start (3).
        EvalRunError: the run stopped part-way; ``.report`` holds the partial report.
    """
    # Every keyword named like a RunOptions field is that option (a test checks they agree).
    options = options_from_keywords(locals())
    outcome = await execute_run(path, options, host=host, on_event=on_event)
    return outcome.report
