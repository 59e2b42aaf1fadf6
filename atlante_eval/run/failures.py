"""What stopped a run or a trial: the cause behind task-group wrappers, the journal.

A run that stops part-way still publishes its report; :func:`cause` names the
error that stopped it (``Type: message``, once however many trials raised it),
and a journal that could not record a finished trial becomes
``eval-journal-failed`` (:func:`journal_diagnostic`), which also leads the
diagnostics when the report could not be published either
(:func:`with_journal_cause`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._util.errors import describe_os_error
from .._util.paths import display_path
from ..diagnostics import Diagnostic, DiagnosticError, error
from .journal import JournalError

__all__ = ["cause", "crash_text", "journal_diagnostic", "journal_failure", "with_journal_cause"]


def _leaves(failure: BaseException) -> list[BaseException]:
    """The exceptions inside task-group wrappers, depth first (``failure`` itself if none)."""
    if not isinstance(failure, BaseExceptionGroup):
        return [failure]
    return [leaf for inner in failure.exceptions for leaf in _leaves(inner)]


def cause(failure: BaseException) -> str:
    """``Type: message`` of the error that stopped a run, unwrapping task-group wrappers.

    Concurrent trials can raise the same error more than once before the run is
    cancelled; identical errors count once, and distinct ones after the first are counted.
    """
    causes = list(dict.fromkeys(f"{type(leaf).__name__}: {leaf}" for leaf in _leaves(failure)))
    if len(causes) == 1:
        return causes[0]
    return f"{causes[0]} (and {len(causes) - 1} other error(s))"


def crash_text(exc: Exception) -> str:
    """A trial's ``error`` for what its code did not expect: the cause, said plainly.

    A proxy failure says so itself; an ``OSError`` is named by its errno
    (``No space left on device (ENOSPC): path``); anything else is ``Type: message``.
    """
    from ..isolation.proxy import ProxyError  # a crash is rare: the proxy loads when one is

    if isinstance(exc, ProxyError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"unexpected error: {type(exc).__name__}: {describe_os_error(exc)}"
    return f"unexpected error: {type(exc).__name__}: {exc}"


def journal_failure(failure: BaseException | None) -> JournalError | None:
    """The journal write that stopped the run, if that is what stopped it."""
    pending = [failure] if failure is not None else []
    while pending:
        current = pending.pop()
        if isinstance(current, JournalError):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return None


def journal_diagnostic(exc: JournalError, report_path: Path | None, run_dir: Path) -> Diagnostic:
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


def with_journal_cause(
    exc: DiagnosticError, failure: BaseException | None, run_dir: Callable[[], Path]
) -> DiagnosticError:
    """``exc``, led by ``eval-journal-failed`` when a journal failure kept the report out.

    ``run_dir`` is asked only then: before the run directory is reserved there is none.
    """
    journal_error = journal_failure(failure)
    if journal_error is None or not any(d.code == "eval-report-failed" for d in exc.diagnostics):
        return exc
    first = journal_diagnostic(journal_error, None, run_dir())
    return DiagnosticError([first, *exc.diagnostics])
