"""Report writers: every file format a run report or a comparison is written in.

A writer renders its subject to bytes; :meth:`ReportWriter.write` writes them
atomically and turns a failure into the one ``eval-report-failed`` diagnostic
(:func:`atlante_eval.report.publish.report_failed`). Adding a format is its renderer
module plus one entry in :data:`RUN_REPORT_WRITERS` (formats of a run report)
or :data:`COMPARE_WRITERS` (formats of a comparison); renderers are imported only
when used, so the CLI stays quick to start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from ..report import PublishError, atomic_write, report_failed

if TYPE_CHECKING:
    from ..report import RunReport
    from ..report.compare import CompareResult

__all__ = [
    "COMPARE_WRITERS",
    "RUN_REPORT_WRITERS",
    "CompareFormat",
    "PublishedComparison",
    "PublishedReport",
    "ReportWriter",
    "RunReportFormat",
    "publish_merged_page",
]

#: The page written beside a published run report (``run``, ``merge --out``).
HTML_FILE = "report.html"

#: File formats of a run report (``run --junit``, ``junit``).
RunReportFormat = Literal["junit", "html"]
#: File formats of a comparison (``compare --markdown``, ``compare --html``).
CompareFormat = Literal["markdown", "html"]

_S = TypeVar("_S")


@dataclass(frozen=True, slots=True)
class PublishedReport:
    """A run report and where its files are: the subject of a run-report writer."""

    report: RunReport
    run_dir: Path | None = None
    """The run directory holding its ``trials/`` files (transcripts), if known."""
    links_from: Path | None = None
    """The directory the output is written in, for relative links to the run's files."""


@dataclass(frozen=True, slots=True)
class PublishedComparison:
    """A comparison and where its page goes: the subject of a comparison writer."""

    result: CompareResult
    links_from: Path | None = None
    """The directory the output is written in, for relative links to trial transcripts."""
    run_dirs: tuple[Path | None, Path | None] = (None, None)
    """BASE's and HEAD's run directories as paths (else ``behaviour``'s, as text)."""


@dataclass(frozen=True, slots=True)
class ReportWriter(Generic[_S]):
    """One output format: a name for messages and a renderer."""

    label: str
    """What the file is called in messages, e.g. ``JUnit file``."""
    render: Callable[[_S], bytes]
    """The file's bytes for a subject."""

    def write(self, subject: _S, path: Path, *, option: str | None = None) -> None:
        """Write ``render(subject)`` to ``path`` atomically, replacing an existing file.

        Args:
            subject: what to render.
            path: the output file.
            option: the command-line option that named ``path``, for the ``next`` step.

        Raises:
            DiagnosticError: ``eval-report-failed`` (exit 3) when the file cannot be written.
        """
        try:
            atomic_write(Path(path), self.render(subject), replace=True)
        except PublishError as exc:
            where = f" for {option}" if option else ""
            raise report_failed(
                path,
                exc,
                action=f"write the {self.label}",
                next=f"choose a writable path{where} and try again",
            ) from None


def _junit(source: PublishedReport) -> bytes:
    from .junit import junit_xml

    return junit_xml(source.report)


def _html(source: PublishedReport) -> bytes:
    from .html import render_run_html

    return render_run_html(source.report, run_dir=source.run_dir, links_from=source.links_from)


def _compare_html(source: PublishedComparison) -> bytes:
    from .html import render_compare_html

    return render_compare_html(
        source.result, links_from=source.links_from, run_dirs=source.run_dirs
    )


def _markdown(source: PublishedComparison) -> bytes:
    from .compare_render import render_markdown

    return render_markdown(source.result).encode("utf-8")


#: Writers of a run report, by format.
RUN_REPORT_WRITERS: dict[RunReportFormat, ReportWriter[PublishedReport]] = {
    "junit": ReportWriter("JUnit file", _junit),
    "html": ReportWriter("HTML report", _html),
}
#: Writers of a comparison, by format.
COMPARE_WRITERS: dict[CompareFormat, ReportWriter[PublishedComparison]] = {
    "markdown": ReportWriter("Markdown summary", _markdown),
    "html": ReportWriter("HTML comparison", _compare_html),
}


def publish_merged_page(report: RunReport, report_path: Path) -> Path:
    """Write ``report.html`` beside a merged report published with ``merge --out``.

    The shards' trial files stay in the shards' run directories, so the page has
    no transcripts to link; everything else is as on a run's page.

    Raises:
        DiagnosticError: ``eval-report-failed`` when the page cannot be written.
    """
    directory = report_path.parent
    page = directory / HTML_FILE
    source = PublishedReport(report, run_dir=None, links_from=directory)
    RUN_REPORT_WRITERS["html"].write(source, page, option="--out")
    return page
