"""``run_eval``: validate, plan, run every trial, publish the report.

This is the whole run as a library call. The CLI is a thin layer over
:func:`execute_run`; Python users call :func:`run_eval`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import anyio
import structlog

from ._version import __version__
from .diagnostics import DiagnosticError, error
from .engine import Engine, EngineOptions, call_sink
from .events import (
    DiagnosticNotice,
    ProgressEvent,
    RunFinished,
    RunStarted,
    ScenarioFinished,
    ScenarioStarted,
    TrialFinished,
    TrialStarted,
)
from .hosts import Host, create_host
from .logs import get_logger
from .plan import Plan, PlannedTrial, make_plan, parse_trials, resolve_budget
from .publish import (
    PublishError,
    atomic_write,
    ensure_gitignore,
    new_run_id,
    publish_error,
    reserve_run_dir,
)
from .report import Meta, RunReport, ScenarioResult, TrialResult
from .results import finalize, scenario_result
from .sandbox import create_run_root, remove_tree
from .suite import Suite, load_suite

__all__ = ["DEFAULT_JOBS", "EvalRunError", "RunControl", "RunOutcome", "execute_run", "run_eval"]

log = get_logger("atlante_eval.run")

#: Trials run at once by default. Model latency dominates a trial, so overlapping a
#: few pays off even on two cores; each OpenCode session also needs ~600 MB and a
#: CPU-second, so more than four at once is left to an explicit ``--jobs``.
DEFAULT_JOBS = 4

ProgressCallback = Callable[[ProgressEvent], object]


class EvalRunError(DiagnosticError):
    """Raised by :func:`run_eval` when a run stopped part-way (exit 3).

    A partial report with every finished trial was still published: ``report`` and
    ``report_path`` say where.
    """

    def __init__(self, diagnostics: Sequence[object], report: RunReport, path: Path | None) -> None:
        super().__init__(diagnostics)  # type: ignore[arg-type]
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
    warnings: tuple[object, ...] = field(default=())


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _validate_jobs(jobs: int | None) -> int:
    if jobs is None:
        return DEFAULT_JOBS
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise DiagnosticError(
            [error("invalid-option", f"--jobs must be a positive integer, got {jobs}")]
        )
    return jobs


@dataclass
class _Progress:
    """Tracks per-scenario completion to emit scenario events and collect results."""

    plan: Plan
    sink: ProgressCallback | None
    done: dict[str, int] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    results: dict[int, TrialResult] = field(default_factory=dict)

    async def emit(self, event: ProgressEvent) -> None:
        if isinstance(event, TrialStarted) and event.scenario not in self.started:
            self.started.add(event.scenario)
            await call_sink(self.sink, ScenarioStarted(event.scenario))
        await call_sink(self.sink, event)

    async def trial_done(self, planned: PlannedTrial, result: TrialResult) -> None:
        self.results[planned.position] = result
        name = planned.scenario.name
        if name not in self.started:
            self.started.add(name)
            await call_sink(self.sink, ScenarioStarted(name))
        self.done[name] = self.done.get(name, 0) + 1
        await call_sink(self.sink, TrialFinished(name, planned.index, result))
        if self.done[name] == self.plan.config.trials:
            trials = [
                self.results[t.position]
                for t in self.plan.trials
                if t.scenario.name == name and t.position in self.results
            ]
            await call_sink(
                self.sink, ScenarioFinished(name, scenario_result(planned.scenario, trials))
            )


def _scenarios(
    plan: Plan, results: dict[int, TrialResult], *, interrupted: bool
) -> dict[str, ScenarioResult]:
    by_name: dict[str, list[TrialResult]] = {}
    for planned in plan.trials:
        result = results.get(planned.position)
        if result is None:
            result = TrialResult(
                i=planned.index,
                verdict="infra-error",
                duration_ms=0,
                error="the run was interrupted before this trial finished"
                if interrupted
                else "the run stopped before this trial finished",
            )
        by_name.setdefault(planned.scenario.name, []).append(result)
    return {
        scenario.name: scenario_result(scenario, by_name.get(scenario.name, []))
        for scenario in plan.scenarios
    }


def _publish(report: RunReport, suite: Suite, out: Path | None) -> tuple[RunReport, Path]:
    base = Path(out) if out is not None else suite.project.root / ".atlante" / "eval"
    try:
        run_id, run_dir = reserve_run_dir(base, report.run_id)
        if out is None:
            ensure_gitignore(suite.project.root / ".atlante")
        report = report.model_copy(update={"run_id": run_id})
        path = run_dir / "report.json"
        atomic_write(path, report.to_json().encode("utf-8"))
    except PublishError as exc:
        raise publish_error(base, exc) from None
    return report, path


async def execute_run(
    path: Path | str | None = None,
    *,
    scenarios: Sequence[str] | None = None,
    trials: int | str | None = None,
    jobs: int | None = None,
    out: Path | str | None = None,
    keep: bool = False,
    host: Host | None = None,
    pass_env: Sequence[str] = (),
    retry_infra: int = 0,
    on_event: ProgressCallback | None = None,
    control: RunControl | None = None,
) -> RunOutcome:
    """Run an evaluation and publish its report; see :func:`run_eval` for arguments.

    Raises:
        DiagnosticError: validation (exit 2) or a run-level problem (exit 3).
        EvalRunError: the run stopped part-way; a partial report was published.
    """
    trial_count = parse_trials(trials)
    job_count = _validate_jobs(jobs)
    suite = load_suite(path, scenario_filter=list(scenarios or ()))
    for warning in suite.warnings:
        await call_sink(on_event, DiagnosticNotice(warning))
    config = suite.project.eval
    runner_host = host if host is not None else create_host(config.host)
    await runner_host.probe()
    assert suite.native is not None
    plan = make_plan(suite.scenarios, resolve_budget(config.budget, trials=trial_count))
    control = control or RunControl()
    run_id = new_run_id()
    started_at = _utc_now()
    started = time.monotonic()
    meta = Meta(
        atlante=__version__,
        host=runner_host.name,
        model=config.model or "unknown",
        model_version="unknown",
        config=plan.config,
        host_version=runner_host.version,
        started_at=started_at,
        jobs=job_count,
        manifest_digest=suite.native.digest,
    )
    progress = _Progress(plan, on_event)
    run_root = create_run_root()
    structlog.contextvars.bind_contextvars(run_id=run_id, host=runner_host.name)
    log.info("run.start", trials=len(plan.trials), jobs=job_count)
    await call_sink(on_event, RunStarted(run_id, len(plan.trials), job_count, runner_host.name))
    engine = Engine(
        plan=plan,
        host=runner_host,
        native=suite.native,
        run_root=run_root,
        options=EngineOptions(
            jobs=job_count,
            keep=keep,
            model=config.model,
            pass_env=tuple(pass_env),
            retry_infra=retry_infra,
        ),
        emit=progress.emit,
        on_trial=progress.trial_done,
    )
    failure: BaseException | None = None
    cancelled = False
    try:
        with anyio.CancelScope() as scope:
            control._scope = scope
            if control.interrupted:
                scope.cancel()
            try:
                await engine.run()
            except Exception as exc:  # noqa: BLE001 - turned into eval-run-failed below
                failure = exc
    except anyio.get_cancelled_exc_class():
        cancelled = True
        raise
    finally:
        with anyio.CancelScope(shield=True):
            stopped = cancelled or control.interrupted or failure is not None
            if not keep:
                await anyio.to_thread.run_sync(remove_tree, run_root)
            report = RunReport(
                run_id=run_id,
                meta=meta.model_copy(
                    update={
                        "ended_at": _utc_now(),
                        "wall_time_ms": int((time.monotonic() - started) * 1000),
                        "run_root": str(run_root) if keep else None,
                        "interrupted": True if stopped else None,
                    }
                ),
                scenarios=_scenarios(plan, progress.results, interrupted=stopped),
            )
            report = finalize(report)
            published, report_path = _publish(report, suite, Path(out) if out else None)
            log.info("run.end", interrupted=stopped, report=str(report_path))
            await call_sink(on_event, RunFinished(published.run_id, stopped))
            structlog.contextvars.unbind_contextvars("run_id", "host")
    if failure is not None:
        raise EvalRunError(
            [
                error(
                    "eval-run-failed",
                    "the run stopped on an unexpected error; a partial report was published",
                    source=str(report_path),
                    cause=f"{type(failure).__name__}: {failure}",
                    next="fix the cause and run again",
                )
            ],
            published,
            report_path,
        )
    if control.interrupted:
        raise EvalRunError(
            [
                error(
                    "eval-run-interrupted",
                    "the run was interrupted; finished trials were kept in a partial report",
                    source=str(report_path),
                    next="run again (or resume) to complete the missing trials",
                )
            ],
            published,
            report_path,
        )
    return RunOutcome(report=published, path=report_path, warnings=suite.warnings)


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
    on_event: ProgressCallback | None = None,
) -> RunReport:
    """Evaluate the harness of the project at ``path`` and return the published report.

    Args:
        path: project directory or its ``atlante.jsonc``/``atlante.json`` (default: cwd).
        scenarios: run only these scenario names.
        trials: trials per scenario (1-50), overriding ``eval.budget.trials``.
        jobs: trials run concurrently (default :data:`DEFAULT_JOBS`).
        out: report base directory instead of ``<project>/.atlante/eval``.
        keep: keep the trial sandboxes (their paths are recorded in the report).
        host: a host to use instead of the configured one (tests, custom hosts).
        pass_env: names of environment variables to hand to the host session.
        retry_infra: rerun a trial up to this many times while it ends in infra-error.
        on_event: called (sync or async) with each progress event.

    Raises:
        DiagnosticError: validation failed (``exit_code`` 2) or the run could not
            start (3).
        EvalRunError: the run stopped part-way; ``.report`` holds the partial report.
    """
    outcome = await execute_run(
        path,
        scenarios=scenarios,
        trials=trials,
        jobs=jobs,
        out=out,
        keep=keep,
        host=host,
        pass_env=pass_env,
        retry_infra=retry_infra,
        on_event=on_event,
    )
    return outcome.report
