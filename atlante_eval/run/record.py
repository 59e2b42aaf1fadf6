"""After a run is published: record it in the history, alert on regressions, summarise.

:func:`recording_for` resolves where (and whether) to record before the first
trial, so a bad ``--history`` or ``eval.history`` stops the run up front (exit 2).
:func:`record_run` runs after the report is published, also for a partial
report: it records the run, compares it with the blessed baseline for its host
and model, POSTs an alert when a scenario that is not quarantined regressed, and
appends a summary to ``$GITHUB_STEP_SUMMARY`` when that is set. Nothing here can
fail the run: every problem becomes a warning (``history-not-recorded``,
``alert-failed``) and the run's exit status stands. The history modules (and
SQLAlchemy) are imported only here, when a history is used.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._util.paths import display_path
from ..diagnostics import Diagnostic, DiagnosticError, warning
from ..history import HistoryLocation, history_location
from ..report import RunReport

if TYPE_CHECKING:
    from ..history.alerts import AlertMessage, CauseFinder
    from ..history.models import IngestResult
    from ..history.store import HistoryStore
    from ..project.config import Project
    from .options import RunOptions

__all__ = [
    "RecordOutcome",
    "Recording",
    "alert_after",
    "blessed_report",
    "delta_cause",
    "expand_webhook",
    "not_recorded",
    "record_run",
    "recording_for",
]

_ENV_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


@dataclass(frozen=True, slots=True)
class Recording:
    """What to do after the run."""

    location: HistoryLocation | None
    """The store to record in (None: do not record)."""
    webhook: str | None
    """Where to POST an alert."""
    baseline: str
    """The blessed baseline name to compare with."""
    step_summary: str | None
    """``$GITHUB_STEP_SUMMARY`` when set."""


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What the after-run step did."""

    ingested: IngestResult | None = None
    """How the run was recorded (None: it was not)."""
    store: str | None = None
    """The store, as messages show it."""
    alert: AlertMessage | None = None
    """The alert, when a scenario regressed."""
    alert_sent: bool = False
    """The webhook took the alert."""
    notes: list[Diagnostic] = field(default_factory=list)
    """Warnings: what could not be done."""


def recording_for(project: Project, options: RunOptions) -> Recording:
    """Resolve the after-run settings of a run (before its first trial).

    Raises:
        DiagnosticError: ``history-invalid-url`` (exit 2).
    """
    config = project.eval
    location = None
    if options.history:
        # The project's store, whatever --out says: the history commands read it there.
        location = history_location(
            options.history_url, configured=config.history, project_root=project.root
        )
    alerts = config.alerts
    webhook = options.alert_webhook or (alerts.webhook if alerts else None)
    return Recording(
        location=location,
        webhook=expand_webhook(webhook) if webhook else None,
        baseline=alerts.baseline if alerts else "default",
        step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
    )


def expand_webhook(value: str) -> str | None:
    """``${NAME}`` → that environment variable's value (None when unset or empty)."""
    match = _ENV_REFERENCE.match(value.strip())
    if match is None:
        return value
    return os.environ.get(match.group(1)) or None


def record_run(
    recording: Recording,
    report: RunReport,
    report_path: Path | None,
    *,
    cause_of: CauseFinder | None = None,
) -> RecordOutcome:
    """Record ``report``, then alert and summarise; problems become warnings."""
    if recording.location is None:
        if recording.webhook:
            return RecordOutcome(notes=[_no_history_alert()])
        return RecordOutcome()
    from ..history.store import open_store

    try:
        with open_store(recording.location) as store:
            ingested = store.ingest(
                report,
                report_path=display_path(report_path.absolute()) if report_path else None,
                run_dir=display_path(report_path.parent.absolute()) if report_path else None,
            )
            if cause_of is None and report_path is not None:
                cause_of = delta_cause(store, report_path.parent)
            outcome = alert_after(store, recording, report, report_path, cause_of)
    except DiagnosticError as exc:
        first = exc.diagnostics[0]
        return RecordOutcome(notes=[not_recorded(first.message, first.cause, first.next)])
    except Exception as exc:  # noqa: BLE001 - the report is out: recording never fails a run
        return RecordOutcome(
            notes=[not_recorded("unexpected error", f"{type(exc).__name__}: {exc}", None)]
        )
    return RecordOutcome(
        ingested=ingested,
        store=recording.location.display,
        alert=outcome.alert,
        alert_sent=outcome.alert_sent,
        notes=outcome.notes,
    )


def delta_cause(store: HistoryStore, head_dir: Path) -> CauseFinder:
    """Why a scenario regressed against the blessed baseline: the behaviour deltas'
    probable cause (docs/compare.md), from both runs' transcripts where they still exist."""

    def cause(name: str, baseline: RunReport, report: RunReport) -> str | None:
        from ..deltas import behaviour_deltas

        try:
            deltas = behaviour_deltas(
                baseline, report, base_dir=store.run_dir(baseline.run_id), head_dir=head_dir
            )
        except (DiagnosticError, OSError, ValueError):
            return None
        found = deltas.scenarios.get(name)
        return found.probable_cause if found is not None else None

    return cause


def not_recorded(message: str, cause: str | None, next_step: str | None) -> Diagnostic:
    """The ``history-not-recorded`` warning."""
    return warning(
        "history-not-recorded",
        f"the run was not recorded in the history: {message}",
        cause=cause,
        next=next_step
        or "record it later with `atlante-eval history ingest RUN_DIR` (docs/history.md)",
    )


def _no_history_alert() -> Diagnostic:
    return warning(
        "alert-failed",
        "no alert: alerts compare with a blessed baseline in the history, and this run "
        "records none (--no-history or eval.history false)",
        next="drop --no-history, or pass --history URL",
    )


def alert_after(
    store: HistoryStore,
    recording: Recording,
    report: RunReport,
    report_path: Path | None,
    cause_of: CauseFinder | None = None,
) -> RecordOutcome:
    """Compare a recorded run with its blessed baseline; alert and write the step summary."""
    if not recording.webhook and not recording.step_summary:
        return RecordOutcome()
    from ..history.alerts import (
        AlertError,
        post_webhook,
        regression_alert,
        step_summary,
        write_step_summary,
    )

    notes: list[Diagnostic] = []
    quarantined = store.quarantined()
    blessing = comparison = alert = None
    try:
        blessing, baseline = store.baseline(
            recording.baseline, host=report.meta.host, model=report.meta.model
        )
    except DiagnosticError as exc:
        if recording.webhook:
            notes.append(
                warning(
                    "alert-failed",
                    f"no alert: {exc.diagnostics[0].message}",
                    next=exc.diagnostics[0].next,
                )
            )
    else:
        alert, comparison = regression_alert(
            report,
            baseline,
            blessing,
            quarantined=quarantined,
            report_file=str(report_path) if report_path else None,
            cause_of=cause_of,
        )
    sent = False
    if alert is not None and recording.webhook:
        try:
            post_webhook(recording.webhook, alert)
            sent = True
        except AlertError as exc:
            notes.append(
                warning(
                    "alert-failed",
                    f"the regression alert was not delivered: {exc}",
                    next="check the webhook URL (--alert-webhook or eval.alerts.webhook); "
                    "the run and its report stand",
                )
            )
    if recording.step_summary:
        text = step_summary(
            report, blessing=blessing, comparison=comparison, quarantined=quarantined
        )
        try:
            write_step_summary(text, recording.step_summary)
        except OSError as exc:
            notes.append(warning("alert-failed", f"the step summary was not written: {exc}"))
    return RecordOutcome(alert=alert, alert_sent=sent, notes=notes)


def blessed_report(
    project: Project, options: RunOptions, name: str, *, host: str | None = None
) -> tuple[RunReport, str]:
    """``run --against blessed[:NAME]``: the blessed baseline's report, and how to name it.

    The baseline is the one blessed for the configured host and model (any model when
    ``eval.model`` is unset: the newest blessing for the host).

    Raises:
        DiagnosticError: ``history-not-configured``, ``history-no-baseline`` (exit 2),
            ``history-unavailable`` (exit 3).
    """
    from ..history.store import open_store

    location = history_location(
        options.history_url, configured=project.eval.history, project_root=project.root
    )
    if location is None:
        raise DiagnosticError([_not_configured()])
    if location.path is not None and not location.path.exists():
        from ..diagnostics import error

        raise DiagnosticError(
            [
                error(
                    "history-no-baseline",
                    f"no history store at {location.display}, so no baseline is blessed",
                    next="bless a recorded run with "
                    '`atlante-eval history bless RUN_ID --reason "..."`',
                )
            ]
        )
    with open_store(location) as store:
        blessing, report = store.baseline(
            name, host=host or project.eval.host, model=project.eval.model
        )
    return report, f"blessed:{blessing.name} (run {blessing.run_id}, {location.display})"


def _not_configured() -> Diagnostic:
    from ..diagnostics import error

    return error(
        "history-not-configured",
        "no history store to read the blessed baseline from (eval.history is false)",
        next="pass --history URL, or set eval.history (docs/history.md)",
    )
