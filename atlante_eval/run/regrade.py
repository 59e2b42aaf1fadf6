"""``regrade``: judge a finished run's trials again with the scenarios' current checks.

No host session is started and nothing is paid for again. Each trial that
reached grading is rebuilt from its stored final state (:mod:`atlante_eval.trial.rebuild`)
and graded by the engine's own grading path (:mod:`.grading`): file checks,
``diff-allowlist`` with the host's recorded runtime artefacts ignored, command
checks with their timeouts under the run's isolation mode, and behaviour checks
over the stored transcript. A new report is published (``meta.regradedFrom``
names the original run); trials that never reached grading keep their verdict.

Before anything is published, the scenarios are compared with the run: a
scenario whose fixture, native outputs, prompt, agent or setup changed is
refused (``regrade-task-changed``), because the stored work would no longer
answer the same task. The checks are what a regrade may change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from .._version import __version__
from ..choices import SELFTEST_HOST, IsolationMode
from ..diagnostics import Diagnostic, DiagnosticError
from ..isolation.limits import LimitSettings, run_limit_groups
from ..isolation.preflight import preflight_isolation
from ..isolation.trial import IsolationSettings
from ..project import Scenario, Suite, load_suite
from ..report import (
    FinalStateRef,
    Meta,
    RunFiles,
    RunReport,
    ScenarioResult,
    TrialRegrade,
    TrialResult,
    load_report,
    publish_error,
    report_path,
    utc_timestamp,
)
from ..report.blobstore import BlobStore
from ..report.final_state import FinalState
from ..report.state_files import carry_final_states
from ..transcript import copy_trial_files
from ..trial import make_skeleton
from ..trial.rebuild import RebuildError
from .isolate import resolve_limits_settings
from .lifecycle import ActiveRun, run_lifecycle
from .options import DEFAULT_JOBS
from .regrade_basis import (
    Loaded,
    check_tasks,
    load_states,
    no_state_error,
    scenario_digests,
    select_scenarios,
    selftest_refusal,
)
from .regrade_sides import Side, regrade_sides
from .regrader import TrialRegrader
from .summary import scenario_result

__all__ = ["RegradeOutcome", "regrade_run"]


@dataclass(frozen=True, slots=True)
class RegradeOutcome:
    """A published regrade: the new report, where it is, and the report it regraded."""

    report: RunReport
    path: Path
    original: RunReport
    original_path: Path
    html: Path | None = None
    """The new run's ``report.html``, when it was written."""
    warnings: tuple[Diagnostic, ...] = field(default=())


@dataclass
class _Regrade:
    """One regrade in progress: what every trial needs."""

    original: RunReport
    states: Mapping[tuple[str, int], Loaded]
    """Final states by ``(key, index)``."""
    regrader: TrialRegrader
    carried: set[str] = field(default_factory=set)
    """Manifest paths carried whole into the new run."""


def _unavailable(trial: TrialResult, reason: str) -> TrialResult:
    """A graded trial that cannot be regraded: an ``infra-error`` that says why."""
    return trial.model_copy(
        update={
            "verdict": "infra-error",
            "error": f"not regraded: {reason}",
            "checks": None,
            "regrade": TrialRegrade(
                status="unavailable", previous_verdict=trial.verdict, reason=reason
            ),
        }
    )


async def _regrade_trial(
    job: _Regrade, scenario: Scenario, side: Side, trial: TrialResult
) -> TrialResult:
    """The trial judged by the scenario's current checks (or kept, or unavailable)."""
    if trial.checks is None:
        return trial.model_copy(
            update={"regrade": TrialRegrade(status="kept", previous_verdict=trial.verdict)}
        )
    key = side.key(scenario.name)
    loaded = job.states.get((key, trial.i))
    if loaded is None or isinstance(loaded, str):
        return _unavailable(trial, loaded or "no final state was stored for this trial")
    try:
        regraded = await job.regrader.grade(
            scenario, trial.i, loaded, tampered=trial.tampered, key=key, native=side.native
        )
    except RebuildError as exc:
        return _unavailable(trial, str(exc))
    if regraded.graded.changed_files != trial.changed_files:
        return _unavailable(trial, "the rebuilt sandbox's changes differ from the trial's")
    ref = trial.final_state
    return regraded.applied_to(trial).model_copy(
        update={
            "final_state": ref if ref is not None and ref.path in job.carried else None,
            "regrade": TrialRegrade(status="regraded", previous_verdict=trial.verdict),
        }
    )


async def _regrade_all(
    job: _Regrade, selected: Sequence[Scenario], sides: Sequence[Side], jobs: int
) -> dict[str, list[TrialResult]]:
    """Every selected scenario's trials of every side, regraded ``jobs`` at a time, by key
    (``scenario`` or ``scenario@arm``) in index order."""
    limiter = anyio.CapacityLimiter(max(1, jobs))
    results: dict[tuple[str, int], TrialResult] = {}

    async def one(scenario: Scenario, side: Side, trial: TrialResult) -> None:
        async with limiter:
            found = await _regrade_trial(job, scenario, side, trial)
            results[(side.key(scenario.name), trial.i)] = found

    pairs = [(scenario, side) for scenario in selected for side in sides]
    async with anyio.create_task_group() as group:
        for scenario, side in pairs:
            for trial in side.trials(job.original, scenario.name):
                group.start_soon(one, scenario, side, trial)
    return {
        side.key(scenario.name): [
            results[(side.key(scenario.name), t.i)]
            for t in side.trials(job.original, scenario.name)
        ]
        for scenario, side in pairs
    }


@dataclass(frozen=True, slots=True)
class _Confinement:
    """How the regraded trials' command checks are contained: as the run's were."""

    isolation: IsolationSettings | None
    limits: LimitSettings


def _meta(original: RunReport, jobs: int, confinement: _Confinement) -> Meta:
    """The new report's metadata: the original run's, marked as regraded from it."""
    return original.meta.model_copy(
        update={
            "atlante": __version__,
            "started_at": utc_timestamp(),
            "ended_at": None,
            "wall_time_ms": None,
            "jobs": jobs,
            "totals": None,
            "run_root": None,
            "interrupted": None,
            "cleanup_failures": None,
            "tampered": None,
            "project_modified": None,
            "isolation": "os" if confinement.isolation is not None else None,
            "limits": confinement.limits.record(),
            "regraded_from": original.run_id,
        }
    )


def _carry(
    source: Path, target: RunFiles, original: RunReport, names: Sequence[str], sides: Sequence[Side]
) -> set[str]:
    """Copy the selected trials' files and final states into the new run directory."""
    trials = [
        (side.key(name), t) for name in names for side in sides for t in side.trials(original, name)
    ]
    copy_trial_files(source, target, [(key, t.i) for key, t in trials])
    refs: list[FinalStateRef] = [t.final_state for _, t in trials if t.final_state is not None]
    if not refs:
        return set()
    with contextlib.closing(RunFiles.open_existing(source)) as origin:
        return {ref.path for ref in carry_final_states(origin, target, refs)}


async def regrade_run(
    run_dir: Path | str,
    *,
    project: Path | str | None = None,
    scenarios: Sequence[str] = (),
    out: Path | str | None = None,
    jobs: int = DEFAULT_JOBS,
    html: bool = True,
) -> RegradeOutcome:
    """Regrade the run at ``run_dir`` with the current checks of the project's scenarios.

    Args:
        run_dir: the run directory (or its ``report.json``) to regrade.
        project: the project whose scenarios hold the checks (default: cwd).
        scenarios: regrade only these scenario names (glob patterns allowed).
        out: report base directory instead of ``<project>/.atlante/eval``.
        jobs: trials regraded at once.
        html: also write ``report.html`` beside the new ``report.json``.

    Returns:
        The new report (published), where it is, and the original.

    Raises:
        DiagnosticError: the run or project cannot be read, a scenario's task
            changed since the run, or nothing was stored to regrade (exit 2);
            isolation is unavailable or the report cannot be written (exit 3).
    """
    original_path = report_path(run_dir)
    original = load_report(original_path)
    if original.meta.host == SELFTEST_HOST:
        raise selftest_refusal(original, original_path)
    suite = load_suite(project, scenario_filter=list(scenarios))
    selected = select_scenarios(original, suite, original_path, filtered=bool(scenarios))
    sides = regrade_sides(original, suite, original_path)
    source = RunFiles.open_existing(original_path.parent)
    with contextlib.closing(source):
        states = await anyio.to_thread.run_sync(load_states, source, original, selected, sides)
    if not any(isinstance(s, FinalState) for s in states.values()):
        raise no_state_error(original, original_path, selected)
    digests = await anyio.to_thread.run_sync(scenario_digests, selected)
    check_tasks(original, selected, sides, states, digests)
    mode: IsolationMode = "os" if original.meta.isolation == "os" else "none"
    bwrap = await preflight_isolation(mode)
    settings = _Confinement(
        # command checks reach no network at all: no model endpoint is needed
        IsolationSettings.build(bwrap, (), suite.project.eval.network.allow)
        if bwrap is not None
        else None,
        await resolve_limits_settings(mode, suite.project.eval),
    )
    return await _publish(
        suite,
        original,
        original_path,
        selected,
        sides,
        states,
        digests,
        settings=settings,
        out=Path(out) if out is not None else None,
        jobs=jobs,
        html=html,
    )


async def _publish(
    suite: Suite,
    original: RunReport,
    original_path: Path,
    selected: Sequence[Scenario],
    sides: Sequence[Side],
    states: Mapping[tuple[str, int], Loaded],
    digests: Mapping[str, str],
    *,
    settings: _Confinement,
    out: Path | None,
    jobs: int,
    html: bool,
) -> RegradeOutcome:
    """Regrade inside a run lifecycle: the new run directory, its report and HTML page."""
    regraded: dict[str, list[TrialResult]] = {}

    def results(_stopped: bool) -> dict[str, ScenarioResult]:
        found: dict[str, ScenarioResult] = {}
        for scenario in selected:
            if scenario.name not in regraded:
                continue
            per_side = {
                side.arm: scenario_result(
                    scenario,
                    regraded[side.key(scenario.name)],
                    fingerprint=identity["fingerprint"],
                    definition=identity["definition"],
                )
                for side in sides
                for identity in [_identity(suite, original, scenario, digests, side)]
            }
            control = per_side.pop(sides[0].arm)
            found[scenario.name] = (
                control.model_copy(update={"arms": dict(sorted(per_side.items()))})
                if per_side
                else control
            )
        return found

    async with run_lifecycle(
        project_root=suite.project.root,
        out=out,
        meta=_meta(original, jobs, settings),
        keep=False,
        results=results,
        partial=False,
        decorate=_uplift if original.meta.variants else None,
    ) as run:
        names = [s.name for s in selected]
        carried = await anyio.to_thread.run_sync(
            _carry, original_path.parent, run.files, original, names, sides
        )
        store = BlobStore.open(run.files)
        if store is None:
            raise publish_error(run.run_dir, OSError("cannot create the final-state store"))
        with store:
            assert suite.native is not None
            job = _Regrade(
                original=original,
                states=states,
                regrader=TrialRegrader(
                    run_root=run.run_root,
                    native=suite.native,
                    store=store,
                    files=run.files,
                    isolation=settings.isolation,
                    limits=settings.limits,
                    skeleton=await make_skeleton(run.run_root),
                ),
                carried=carried,
            )
            async with run_limit_groups(settings.limits):
                regraded.update(await _regrade_all(job, selected, sides, jobs))
    assert run.report is not None
    assert run.report_path is not None
    page = await _html(run) if html else None
    return RegradeOutcome(
        report=run.report,
        path=run.report_path,
        original=original,
        original_path=original_path,
        html=page,
        warnings=suite.warnings,
    )


def _uplift(report: RunReport) -> RunReport:
    """The regraded arms' uplift section, from the new verdicts."""
    from ..report.uplift import with_uplift

    return with_uplift(report)


def _identity(
    suite: Suite, original: RunReport, scenario: Scenario, digests: Mapping[str, str], side: Side
) -> dict[str, str | None]:
    """The regraded trials' fingerprint and definition digest (their checks are current)."""
    from ..project import definition_digest, scenario_fingerprint

    definition = definition_digest(scenario, fixture=digests.get(scenario.name))
    budget = scenario.document.budget
    meta = original.meta
    info = side.info
    return {
        "definition": definition,
        "fingerprint": scenario_fingerprint(
            scenario,
            manifest_digest=side.native.digest,
            host=meta.host,
            host_version=info.host_version if info is not None else meta.host_version,
            model=info.model if info is not None else suite.project.eval.model,
            timeout_ms=budget.timeout_ms if budget is not None else meta.config.timeout_ms,
            max_tokens=meta.config.max_tokens,
            definition=definition,
        ),
    }


async def _html(run: ActiveRun) -> Path | None:
    """Publish ``report.html`` beside the regraded report (a failure leaves it out)."""
    from ..views.formats import RUN_REPORT_WRITERS, PublishedReport

    report = run.report
    assert report is not None

    def publish() -> Path:
        source = PublishedReport(report, run_dir=run.run_dir, links_from=run.run_dir)
        return run.publish("report.html", RUN_REPORT_WRITERS["html"].render(source))

    try:
        return await anyio.to_thread.run_sync(publish)
    except DiagnosticError:
        return None
