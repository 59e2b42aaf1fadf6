"""``html``: render a report, or the history of many, as a self-contained HTML page."""

from pathlib import Path
from typing import Annotated

import typer

from .app import app, guarded, print_diagnostics

__all__ = ["html"]

_HTML_FILE = "report.html"
_OURS = b'<meta name="generator" content="atlante-eval'


@app.command()
def html(
    report: Annotated[
        Path | None,
        typer.Argument(
            metavar="REPORT",
            help="A report.json, or the run directory that holds one (any report: a run's, "
            "merged, selftest, or the reference tool's).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the page to FILE (default: report.html beside the report).",
            show_default=False,
        ),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            metavar="DIR|STORE",
            help="Render a history instead (needs -o): of every run report under DIR, or of "
            "a history store (a SQLite file, sqlite:///PATH or postgresql://...).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Render a run report as one self-contained HTML page (no network, works offline).

    With --history DIR: one page over every report under DIR (a project's
    .atlante/eval, or a folder of CI artifacts), oldest first, selftests left out.
    With --history STORE: a scenarios x runs heat map and per-scenario trends from
    the history store.
    Exit status: 0, 2 when a report cannot be read or an option is invalid, 3 when
    the page cannot be written.
    """

    def action() -> int:
        from ..diagnostics import DiagnosticError, error
        from ..report import check_output_paths

        if (report is None) == (history is None):
            raise DiagnosticError(
                [
                    error(
                        "invalid-option",
                        "pass either REPORT or --history DIR",
                        next="e.g. `atlante-eval html RUN_DIR` or "
                        "`atlante-eval html --history .atlante/eval -o history.html`",
                    )
                ]
            )
        check_output_paths({"--output": output})
        if history is not None:
            if "://" in history or Path(history).is_file():
                return _store_history(history, output)
            return _history(Path(history), output)
        assert report is not None
        return _report(report, output)

    raise typer.Exit(guarded(action))


def _report(report: Path, output: Path | None) -> int:
    from ..report import load_report, report_path
    from ..views.formats import RUN_REPORT_WRITERS, PublishedReport

    file = report_path(report)
    loaded = load_report(file)
    target = output if output is not None else file.parent / _HTML_FILE
    if output is None:
        _refuse_foreign(target)
    source = PublishedReport(loaded, run_dir=file.parent, links_from=target.absolute().parent)
    RUN_REPORT_WRITERS["html"].write(source, target, option="--output")
    typer.echo(f"html: {target}")
    return 0


def _refuse_foreign(target: Path) -> None:
    """Refuse to replace a ``report.html`` this tool did not write (or anything not a file)."""
    import os

    from ..diagnostics import DiagnosticError, error

    if not os.path.lexists(target):
        return
    ours = False
    if target.is_file() and not target.is_symlink():
        try:
            with target.open("rb") as handle:
                ours = _OURS in handle.read(2048)
        except OSError:
            ours = False
    if not ours:
        raise DiagnosticError(
            [
                error(
                    "invalid-output-path",
                    f"{target} exists and was not written by atlante-eval; it is left alone",
                    source=str(target),
                    next="pass -o FILE to write the page elsewhere",
                )
            ]
        )


def _needs_output(source: str, output: Path | None) -> Path:
    from ..diagnostics import DiagnosticError, error

    if output is None:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    "--history needs -o FILE: where to write the page",
                    next=f"e.g. `atlante-eval html --history {source} -o history.html`",
                )
            ]
        )
    return output


def _store_history(source: str, output: Path | None) -> int:
    from ..history import parse_history_url
    from ..history.store import RunFilter, open_store
    from ..views.formats import ReportWriter
    from ..views.html.history import MAX_HISTORY_REPORTS
    from ..views.html.history_store import store_history_page
    from ..views.html.render import render_store_history_html

    target = _needs_output(source, output)
    location = parse_history_url(source)
    with open_store(location) as store:
        runs, matrix = store.matrix(RunFilter(limit=MAX_HISTORY_REPORTS))
        page = store_history_page(location.display, runs, matrix, store.quarantined())
    writer: ReportWriter[None] = ReportWriter(
        "HTML history", lambda _: render_store_history_html(page)
    )
    writer.write(None, target, option="--output")
    typer.echo(f"html: {target} ({len(runs)} runs from {location.display})")
    return 0


def _history(directory: Path, output: Path | None) -> int:
    from ..diagnostics import DiagnosticError, error
    from ..views.formats import ReportWriter

    if output is None:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    "--history needs -o FILE: where to write the page",
                    next=f"e.g. `atlante-eval html --history {directory} -o history.html`",
                )
            ]
        )
    if not directory.is_dir():
        raise DiagnosticError(
            [
                error(
                    "report-unreadable",
                    f"{directory} is not a directory",
                    source=str(directory),
                    next="pass the directory that holds the run directories",
                )
            ]
        )
    from ..views.html import render_history_html
    from ..views.html.history import collect_reports

    reports, notes = collect_reports(directory)
    print_diagnostics(notes)
    if not reports:
        raise DiagnosticError(
            [
                error(
                    "report-unreadable",
                    f"no run report found under {directory} (selftest reports are left out)",
                    source=str(directory),
                    next="pass a directory of run directories, e.g. .atlante/eval",
                )
            ]
        )
    writer: ReportWriter[Path] = ReportWriter(
        "HTML history", lambda d: render_history_html(d, reports)
    )
    writer.write(directory, output, option="--output")
    typer.echo(f"html: {output} ({len(reports)} runs)")
    return 0
