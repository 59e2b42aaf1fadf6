"""What ``atlante-eval show`` shows: a run, a scenario's trials, one trial, as data.

:func:`locate_run` finds a report (a run directory, a ``report.json``, a run id,
or by default the newest real run of a project: selftest runs are skipped).
:func:`run_view`, :func:`scenario_view` and :func:`trial_view` turn a report into
frozen models; ``show --json`` prints them, :mod:`atlante_eval.views.show_render` draws
them. A trial's view is the one the HTML report lays out too
(:class:`atlante_eval.views.trial.TrialView`), read here within :data:`SHOW_CAPS`.
All text in these models is as recorded (untrusted): renderers escape it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..choices import SELFTEST_HOST
from ..diagnostics import DiagnosticError, error
from ..report import (
    REPORT_FILE,
    OutputModel,
    RunFiles,
    RunReport,
    ScenarioResult,
    TrialResult,
    arm_of,
    load_report,
    report_base,
    report_path,
)
from .arms_render import ArmTable, arm_table
from .causes import check_failures, no_graded_note, trial_cause, verdict_counts
from .run_setup import isolation_of, setup_line
from .trial import TranscriptCaps, TrialView, build_trial_view

__all__ = [
    "SHOW_CAPS",
    "FailingCheck",
    "RunView",
    "ScenarioSummary",
    "ScenarioView",
    "TrialRow",
    "TrialView",
    "locate_run",
    "resolve",
    "run_view",
    "scenario_view",
    "select",
    "select_arm",
    "trial_view",
]

#: How much of a trial's transcript ``show`` reads.
SHOW_CAPS = TranscriptCaps(max_bytes=32 * 1024 * 1024, max_entries=20_000, reader="show")
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class FailingCheck(OutputModel):
    """How often one check of a scenario failed over its graded trials."""

    index: int
    """The check's position in the scenario document."""
    type: str
    """The check type."""
    failed: int
    """Trials where it failed."""
    errored: int
    """Trials where it could not produce a verdict."""
    graded: int
    """Trials whose checks ran."""


class ScenarioSummary(OutputModel):
    """One scenario of a run at a glance."""

    name: str
    """Scenario name."""
    trials: int
    """Trials in the report."""
    pass_rate: float
    """``pass`` trials / executed trials (the reference's rate)."""
    passed: int
    """Trials with verdict ``pass``."""
    graded: int
    """Executed trials minus infra-errors."""
    pass_rate_graded: float | None
    """``pass`` trials / graded trials (``None`` when none was graded)."""
    wilson95: tuple[float, float] | None
    """95% Wilson interval of ``passRateGraded``."""
    verdicts: dict[str, int]
    """Trials per verdict."""
    note: str | None
    """``not run (...)`` or ``no graded trials (...)`` when no trial was graded."""
    failing_checks: list[FailingCheck]
    """Checks that failed or errored in some trial."""
    mean_duration_ms: int
    """Mean duration of executed trials."""
    duration_p95_ms: int
    """95th percentile duration of executed trials."""


class RunView(OutputModel):
    """A run overview: ``show [RUN]``."""

    run_id: str
    """The run id."""
    report: str
    """Path of the report file."""
    host: str
    """Host name."""
    host_version: str | None
    """Host version."""
    model: str
    """Model."""
    isolation: str
    """``os`` or ``none``: how the trials were isolated."""
    setup: str
    """What the run ran on, in one line (host and version, model, isolation, limits)."""
    started_at: str | None
    """UTC start time."""
    wall_time_ms: int | None
    """Wall time of the run."""
    interrupted: bool
    """The run was interrupted or stopped part-way."""
    config: dict[str, int]
    """The run budget (``meta.config``)."""
    verdicts: dict[str, int]
    """Trials per verdict over the run."""
    scenarios: list[ScenarioSummary]
    """Every scenario, in report order (of a run with arms: the control arm's)."""
    arms: ArmTable | None = None
    """A run with arms: every arm's pass rates per scenario, with the uplift verdicts."""


class TrialRow(OutputModel):
    """One trial in a scenario listing."""

    i: int
    """Trial index."""
    verdict: str
    """Verdict."""
    duration_ms: int
    """Duration."""
    tokens: int | None
    """Tokens reported."""
    cost: float | None
    """Cost reported."""
    cause: str | None
    """Why it did not pass (one line), ``None`` for a pass."""


class ScenarioView(OutputModel):
    """A scenario's trials: ``show RUN SCENARIO``."""

    run_id: str
    """The run id."""
    summary: ScenarioSummary
    """The scenario at a glance."""
    trials: list[TrialRow]
    """Its trials in index order."""
    arm: str | None = None
    """A run with arms: the arm these trials are of (``SCENARIO@ARM``; default the control)."""
    other_arms: tuple[str, ...] = ()
    """A run with arms: the other arms, each shown by ``show RUN SCENARIO@ARM``."""


def _not_found(message: str, source: str, next_step: str) -> DiagnosticError:
    return DiagnosticError([error("report-unreadable", message, source=source, next=next_step)])


def _is_real_run(report_file: Path) -> bool:
    """Whether ``report_file`` is a readable report of a ``run`` (not a selftest)."""
    if (report_file.parent / "selftest.json").exists():
        return False
    try:
        report = load_report(report_file)
    except DiagnosticError:
        return False
    return report.meta.host != SELFTEST_HOST


def _project_base(project: Path | None, out: Path | None) -> Path:
    if out is not None:
        return out
    from ..project import find_config

    return report_base(find_config(project).parent, None)


def locate_run(
    run: str | Path | None, *, project: Path | None = None, out: Path | None = None
) -> Path:
    """Return the report file ``run`` names.

    ``run`` is a run directory, a ``report.json``, a run id under the report base
    (``out``, else the project's ``.atlante/eval``), or ``None`` for the newest
    real run there (selftest runs and unreadable reports are skipped).

    Raises:
        DiagnosticError: ``report-unreadable`` (exit 2) when nothing is found, or
            ``eval-not-configured`` when no project is found to look in.
    """
    if run is not None:
        candidate = Path(run)
        if candidate.exists():
            return report_path(candidate)
        text = str(run)
        if not _RUN_ID.match(text):
            raise _not_found(
                f"no run directory, report or run id {text!r}",
                text,
                "pass a run directory, its report.json, or a run id",
            )
        base = _project_base(project, out)
        file = base / text / REPORT_FILE
        if not file.exists():
            raise _not_found(
                f"no run {text} under {base}",
                str(base),
                "pass a run directory or report.json, or --project/--out to say where runs are",
            )
        return file
    base = _project_base(project, out)
    runs = sorted((p for p in base.iterdir() if p.is_dir()), reverse=True) if base.is_dir() else []
    selftests = []
    for directory in runs:
        if _is_real_run(directory / REPORT_FILE):
            return directory / REPORT_FILE
        if (directory / "selftest.json").exists():
            selftests.append(directory)
    if selftests:
        raise _not_found(
            f"no run report found under {base}: only selftest runs "
            f"({len(selftests)}), which show leaves out unless named",
            str(base),
            f"run `atlante-eval run` first, or name a run: `atlante-eval show {selftests[0]}`",
        )
    raise _not_found(
        f"no run report found under {base}",
        str(base),
        "run `atlante-eval run` first, or pass a run directory or report.json",
    )


def _is_project(path: Path) -> bool:
    """A directory holding a project's configuration (and no report of its own)."""
    if not path.is_dir() or (path / REPORT_FILE).exists():
        return False
    from ..project import find_config

    try:
        find_config(path)
    except DiagnosticError:
        return False
    return True


def resolve(
    run: str | None,
    target: str | None,
    *,
    project: Path | None = None,
    out: Path | None = None,
) -> tuple[Path, str | None]:
    """The report file and the ``SCENARIO[:I]`` that ``show RUN [SCENARIO[:I]]`` names.

    Beyond :func:`locate_run`: ``RUN`` may be a project directory (its newest
    run: ``show .``), and a lone ``SCENARIO[:I]`` that names no run but a
    scenario of the newest run shows that scenario there (``show fix-login:0``).

    Raises:
        DiagnosticError: as :func:`locate_run` (for a lone word naming neither, the
            run that was not found).
    """
    if run is not None and _is_project(Path(run)):
        return locate_run(None, project=Path(run), out=out), target
    try:
        return locate_run(run, project=project, out=out), target
    except DiagnosticError as missing:
        if run is None or target is not None:
            raise
        newest = _newest_with_scenario(run, project=project, out=out)
        if newest is None:
            raise missing from None
        return newest, run


def _newest_with_scenario(text: str, *, project: Path | None, out: Path | None) -> Path | None:
    """The newest run's report when it has the scenario ``text`` (``SCENARIO[:I]``) names."""
    head, _, tail = text.rpartition(":")
    name = head if head and tail.isascii() and tail.isdigit() else text
    name = name.partition("@")[0]
    try:
        newest = locate_run(None, project=project, out=out)
        report = load_report(newest)
    except DiagnosticError:
        return None
    return newest if name in report.scenarios else None


def select(report: RunReport, target: str) -> tuple[str, int | None]:
    """Split ``SCENARIO`` or ``SCENARIO:I`` and check both exist in ``report``.

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) naming what exists.
    """
    name, index = target, None
    if target not in report.scenarios and ":" in target:
        head, _, tail = target.rpartition(":")
        if tail.isascii() and tail.isdigit():
            name, index = head, int(tail)
    if name not in report.scenarios:
        names = ", ".join(sorted(report.scenarios)) or "(none)"
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"run {report.run_id} has no scenario {name!r}",
                    expected=f"one of {names}",
                    next="pass SCENARIO or SCENARIO:I as listed by `atlante-eval show RUN`",
                )
            ]
        )
    if index is not None and not any(t.i == index for t in report.scenarios[name].trials):
        count = len(report.scenarios[name].trials)
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"scenario {name!r} has no trial {index}",
                    expected=f"a trial index from 0 to {count - 1}" if count else "no trials",
                    next=f"pass {name}:I with one of the trial indices shown by "
                    f"`atlante-eval show RUN {name}`",
                )
            ]
        )
    return name, index


def select_arm(report: RunReport, target: str) -> tuple[RunReport, str, str | None]:
    """Split ``SCENARIO@ARM[:I]``: the arm's view of ``report``, ``SCENARIO[:I]``, the arm.

    Without ``@ARM`` the report is returned as it is (a run with arms: the control's
    view) with its control arm, if any.

    Raises:
        DiagnosticError: ``unknown-variant`` (exit 2) for an arm the run does not have.
    """
    control = next((a.name for a in report.meta.variants or [] if a.control), None)
    if "@" not in target or target in report.scenarios:
        return report, target, control
    scenario, _, rest = target.partition("@")
    arm, colon, index = rest.partition(":")
    return arm_of(report, arm, option=f"show {target}"), scenario + colon + index, arm


def _summary(name: str, result: ScenarioResult) -> ScenarioSummary:
    stats = result.stats
    graded = stats is not None and stats.graded > 0
    counts = verdict_counts(result)
    return ScenarioSummary(
        name=name,
        trials=len(result.trials),
        passed=counts["pass"],
        graded=len(result.trials) - counts["infra-error"] - counts["skipped-budget"],
        pass_rate=result.pass_rate,
        pass_rate_graded=stats.pass_rate_graded if graded and stats else None,
        wilson95=stats.wilson95 if graded and stats else None,
        verdicts=dict(counts),
        note=no_graded_note(result),
        failing_checks=[
            FailingCheck(
                index=f.index, type=f.type, failed=f.failed, errored=f.errored, graded=f.graded
            )
            for f in check_failures(result)
        ],
        mean_duration_ms=result.mean_duration_ms,
        duration_p95_ms=result.spread.duration_p95_ms,
    )


def run_view(report: RunReport, path: Path) -> RunView:
    """The overview of ``report`` (published at ``path``)."""
    meta = report.meta
    verdicts: dict[str, int] = {}
    for trial in report.all_trials():
        verdicts[trial.verdict] = verdicts.get(trial.verdict, 0) + 1
    return RunView(
        run_id=report.run_id,
        report=str(path),
        host=meta.host,
        host_version=meta.host_version,
        model=meta.model,
        isolation=isolation_of(meta),
        setup=setup_line(meta),
        started_at=meta.started_at,
        wall_time_ms=meta.wall_time_ms,
        interrupted=bool(meta.interrupted),
        config=meta.config.model_dump(by_alias=True),
        verdicts=verdicts,
        scenarios=[_summary(name, result) for name, result in report.scenarios.items()],
        arms=arm_table(report),
    )


def _row(trial: TrialResult, report: RunReport) -> TrialRow:
    return TrialRow(
        i=trial.i,
        verdict=trial.verdict,
        duration_ms=trial.duration_ms,
        tokens=trial.tokens,
        cost=trial.cost,
        cause=trial_cause(trial, report.meta.config),
    )


def scenario_view(
    report: RunReport, name: str, *, arm: str | None = None, arms: list[str] | None = None
) -> ScenarioView:
    """The trials of scenario ``name`` in ``report`` (an arm's view: ``arm``, of ``arms``)."""
    result = report.scenarios[name]
    return ScenarioView(
        run_id=report.run_id,
        summary=_summary(name, result),
        trials=[_row(t, report) for t in result.trials],
        arm=arm,
        other_arms=tuple(a for a in arms or [] if a != arm),
    )


def _open_run_dir(path: Path) -> RunFiles | None:
    """Open the run directory the user named (a symlink to it is followed; nothing below it is)."""
    try:
        return RunFiles(path, os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    except OSError:
        return None


def trial_view(
    report: RunReport, path: Path, name: str, index: int, *, key: str | None = None
) -> TrialView:
    """Trial ``index`` of scenario ``name`` in ``report`` (published at ``path``), in full.

    Its transcript is read from the run directory beside the report, when one was
    recorded, under ``trials/<key>/<index>`` (``key``: the scenario's name, or an
    arm's :func:`~atlante_eval.report.trial_key`); the view names the trial by ``key``.
    """
    trial = next(t for t in report.scenarios[name].trials if t.i == index)
    files = _open_run_dir(path.parent)
    try:
        return build_trial_view(
            trial,
            run_id=report.run_id,
            scenario=key or name,
            config=report.meta.config,
            files=files,
            caps=SHOW_CAPS,
            prompt=report.scenarios[name].prompt,
        )
    finally:
        if files is not None:
            files.close()
