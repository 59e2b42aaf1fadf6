"""One run's lifecycle: reserve its directory, run it, finalize and publish its report.

:func:`run_lifecycle` is the one owner of a run's directory and temporary run
root. Every caller that runs an engine (``run``, ``selftest``) enters it with
the run's :class:`~atlante_eval.report.models.Meta` and a function that assembles the
scenario results; inside, it builds and runs its engine on
:attr:`ActiveRun.run_root`. On the way out, also on error or cancellation and
under a shielded scope, the run root is removed (unless ``keep``), the report is
finalized (end time, wall time, ``interrupted``, ``cleanupFailures``) and
published as ``report.json`` in the reserved directory. Before that, anything in
the run directory the engine did not write is moved aside and listed in
``meta.tampered`` (see :meth:`ReportDir.sweep`). A run with a journal gets it with
its directory: the directory appears holding the journal's header, so a run
killed at any moment leaves no run directory or a resumable one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from .._util.fstree import RemovalFailure
from .._util.paths import display_path
from ..diagnostics import Diagnostic, DiagnosticError, warning
from ..report import (
    REPORT_FILE,
    TRIALS_DIR,
    CleanupFailure,
    HostSource,
    Meta,
    PublishError,
    ReportDir,
    RunFiles,
    RunReport,
    ScenarioResult,
    TamperedFile,
    check_unchanged,
    new_run_id,
    publish_error,
    report_base,
    reserve_report_dir,
    utc_timestamp,
)
from ..trial import create_run_root, remove_tree
from .failures import journal_diagnostic
from .journal import Journal, JournalError

__all__ = [
    "ActiveRun",
    "EndHook",
    "FinishHook",
    "JournalSeed",
    "ScenarioResults",
    "cleanup_warning",
    "run_lifecycle",
]

#: Assembles the report's scenarios; called with whether the run stopped part-way.
ScenarioResults = Callable[[bool], Mapping[str, ScenarioResult]]
#: Called (shielded) once the report is published, even when the run was cancelled.
EndHook = Callable[["ActiveRun"], Awaitable[None]]
#: Called (shielded) before the report is assembled; returns extra ``Meta`` fields.
FinishHook = Callable[[], Awaitable[Mapping[str, object]]]


@dataclass
class ActiveRun:
    """A run in progress: its reserved directory, its run root, and its report once out."""

    report_dir: ReportDir
    run_root: Path
    """The temporary directory that holds the trial sandboxes."""
    files: RunFiles
    """The reserved run directory, held open: trials write their files through it."""
    stopped: bool = False
    """Set by the caller when the run stopped part-way; cancellation sets it too."""
    report: RunReport | None = None
    """The published report (set on the way out)."""
    report_path: Path | None = None
    """Where the report was published (set on the way out)."""
    cleanup_failures: list[RemovalFailure] = field(default_factory=list)
    """Sandboxes (or the run root) that could not be removed; the engine appends to it."""
    journal: Journal | None = None
    """The run's journal, made with the directory (``run_lifecycle(journal=...)``)."""

    @property
    def run_id(self) -> str:
        """The run id (the reserved directory's name)."""
        return self.report_dir.run_id

    @property
    def run_dir(self) -> Path:
        """The reserved run directory."""
        return self.report_dir.path

    def publish(self, name: str, data: bytes) -> Path:
        """Write another file into the run directory (see :meth:`ReportDir.publish`)."""
        return self.report_dir.publish(name, data)


@asynccontextmanager
async def run_lifecycle(
    *,
    project_root: Path,
    out: Path | None,
    meta: Meta,
    keep: bool,
    results: ScenarioResults,
    partial: bool = True,
    on_end: EndHook | None = None,
    decorate: Callable[[RunReport], RunReport] | None = None,
    finish: FinishHook | None = None,
    journal: JournalSeed | None = None,
) -> AsyncIterator[ActiveRun]:
    """Reserve a run directory and a run root; publish the run's report on the way out.

    Args:
        project_root: the project; the report goes under ``.atlante/eval`` unless ``out``.
        out: the report base directory given by the user, if any.
        meta: the run's metadata; end time and wall time are filled in on the way out.
        keep: keep the run root (its path is recorded in the report).
        results: assembles the report's scenarios from what the body recorded.
        partial: when the body raises (or is cancelled), still publish the report
            with what finished (``True``), or discard the empty run directory.
        on_end: called after publishing, shielded, also on cancellation.
        decorate: adds to the finalized report before it is published (e.g. an
            adaptive run's decision record), also on cancellation.
        finish: called before the report is assembled, shielded; its fields are
            added to the report's ``meta`` (e.g. ``project_modified``).
        journal: the journal's header, for a run that journals its trials: the run
            directory appears with its journal (:attr:`ActiveRun.journal`) in it.

    Raises:
        DiagnosticError: ``eval-report-failed`` (exit 3) when the directory cannot
            be reserved or the report cannot be published; ``eval-journal-failed``
            when its journal cannot be created.
    """
    run = _reserve(project_root, out, journal)
    started = time.monotonic()
    failed = False
    try:
        yield run
    except BaseException:
        failed = True
        run.stopped = True
        raise
    finally:
        with anyio.CancelScope(shield=True):
            if not keep:
                await _remove_run_root(run)
            try:
                if failed and not partial:
                    _discard(run)
                else:
                    extra = dict(await finish()) if finish is not None else {}
                    ended = _ended(meta, run, started=started, keep=keep, extra=extra)
                    _publish(run, ended, results, decorate)
                    if on_end is not None:
                        await on_end(run)
            finally:
                if run.journal is not None:
                    run.journal.close()
                run.files.close()


@dataclass
class JournalSeed:
    """Creates a run's journal in its directory before the directory gets its name."""

    plan_digest: str
    """The run's plan digest (the journal's header)."""
    host_version: str | None = None
    """The host version the run runs (the header; a resume across versions is refused)."""
    host_source: HostSource | None = None
    """Where that host came from (the header)."""
    journal: Journal | None = None
    """The journal, once created."""

    def __call__(self, staging: Path, run_id: str) -> Callable[[], None]:
        self.journal = Journal(
            staging,
            run_id=run_id,
            plan_digest=self.plan_digest,
            host_version=self.host_version,
            host_source=self.host_source,
        )
        return self.journal.close


def _reserve(project_root: Path, out: Path | None, seed: JournalSeed | None) -> ActiveRun:
    """Reserve the run directory (held open, with its journal) and create the run root.

    Raises:
        DiagnosticError: ``eval-report-failed`` (exit 3) when the directory cannot
            be reserved or opened, ``eval-journal-failed`` when the journal cannot
            be created.
    """
    base = report_base(project_root, out)
    try:
        report_dir = reserve_report_dir(
            base, new_run_id(), project_root=project_root if out is None else None, seed=seed
        )
    except JournalError as exc:
        raise DiagnosticError([journal_diagnostic(exc, None, base)]) from None
    journal = seed.journal if seed is not None else None
    if journal is not None:
        journal.moved(report_dir.path)
    try:
        files = RunFiles.open(report_dir.path, report_dir.identity)
    except OSError as exc:
        if journal is not None:
            journal.close()
        raise publish_error(report_dir.path, exc) from None
    try:
        return ActiveRun(
            report_dir=report_dir, run_root=create_run_root(), files=files, journal=journal
        )
    except BaseException:
        if journal is not None:
            journal.close()
        files.close()
        raise


async def _remove_run_root(run: ActiveRun) -> None:
    """Remove the run root; a leftover is recorded unless the engine recorded one already."""
    left = await anyio.to_thread.run_sync(remove_tree, run.run_root)
    if left is not None and not run.cleanup_failures:
        run.cleanup_failures.append(left)


def _discard(run: ActiveRun) -> None:
    """Remove a run directory nothing was published into, unless it now leads elsewhere."""
    report_dir = run.report_dir
    with contextlib.suppress(OSError, PublishError):
        check_unchanged(run.run_dir, report_dir.identity, anchor=report_dir.anchor)
        remove_tree(run.run_dir / TRIALS_DIR)
        run.run_dir.rmdir()


def _publish(
    run: ActiveRun,
    meta: Meta,
    results: ScenarioResults,
    decorate: Callable[[RunReport], RunReport] | None,
) -> None:
    """Assemble, finalize and publish ``report.json`` (``run.report``, ``run.report_path``)."""
    from ..report.results import finalize  # the statistics: once the trials are over

    scenarios = dict(results(run.stopped))
    run.report = finalize(RunReport(run_id=run.run_id, meta=meta, scenarios=scenarios))
    if decorate is not None:
        run.report = decorate(run.report)
    run.report_path = run.publish(REPORT_FILE, run.report.to_json().encode("utf-8"))


def _ended(
    meta: Meta, run: ActiveRun, *, started: float, keep: bool, extra: Mapping[str, object]
) -> Meta:
    """``meta`` completed with what is known once the run is over (and ``extra`` fields)."""
    return meta.model_copy(
        update={
            **extra,
            "ended_at": utc_timestamp(),
            "wall_time_ms": int((time.monotonic() - started) * 1000),
            "run_root": display_path(run.run_root) if keep else None,
            "interrupted": True if run.stopped else None,
            "cleanup_failures": [
                CleanupFailure(path=f.path, reason=f.reason, count=f.count)
                for f in run.cleanup_failures
            ]
            or None,
            "tampered": _sweep(run.report_dir),
        }
    )


def cleanup_warning(failures: Sequence[RemovalFailure]) -> Diagnostic | None:
    """The run-level warning for sandboxes left behind (``eval-cleanup-failed``), if any."""
    if not failures:
        return None
    first = failures[0]
    plural = "y" if len(failures) == 1 else "ies"
    return warning(
        "eval-cleanup-failed",
        f"{len(failures)} sandbox director{plural} could not be removed: "
        f"{first.path}: {first.reason}",
        source=first.path,
        next="remove it by hand (it may hold files an agent made unremovable); "
        "meta.cleanupFailures in the report lists every one",
    )


def _sweep(report_dir: ReportDir) -> list[TamperedFile] | None:
    """Move foreign entries out of the run directory; return them for the report."""
    with contextlib.suppress(PublishError):  # publishing sweeps again and reports why not
        report_dir.sweep()
    entries = [TamperedFile(path=e.path, moved_to=e.moved_to) for e in report_dir.tampered]
    return entries or None
