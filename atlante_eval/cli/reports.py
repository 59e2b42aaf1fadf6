"""Commands over published reports: ``compare``, ``junit`` and ``merge``.

Each command reads reports with :func:`atlante_eval.report.loading.load_report`
(``report-unreadable``, exit 2) and writes files atomically.
"""

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._util.terminal import use_color
from ..choices import DEFAULT_ALPHA, DEFAULT_MARGIN, Adjust, FailOn
from .app import app, guarded, positive_int, print_diagnostics

if TYPE_CHECKING:
    from ..history.gate import GateDecision
    from ..report import RunReport
    from ..report.compare import CompareResult

__all__ = ["compare", "compare_command", "junit", "merge", "merge_command"]

_REPORT_HELP = "a report.json, or the run directory that holds one"
BaseArg = Annotated[
    Path, typer.Argument(metavar="BASE", help=f"The baseline: {_REPORT_HELP}.", show_default=False)
]
HeadArg = Annotated[
    Path | None,
    typer.Argument(
        metavar="HEAD",
        help=f"The revision under test: {_REPORT_HELP} (with --arms: default BASE).",
        show_default=False,
    ),
]
ReportArg = Annotated[
    Path, typer.Argument(metavar="REPORT", help=f"The report: {_REPORT_HELP}.", show_default=False)
]


@app.command()
def compare(
    base: BaseArg,
    head: HeadArg = None,
    arms: Annotated[
        str | None,
        typer.Option(
            "--arms",
            metavar="A,B",
            help="Compare arm A with arm B (eval.variants): of one run (compare RUN --arms "
            "A,B), or BASE's arm A with HEAD's arm B.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON (see docs/cli.md).")
    ] = False,
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown",
            metavar="FILE",
            help="Also write a Markdown summary to FILE ('-' prints it instead of the table).",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when a scenario or the overall row regressed (or changed at all); "
            "says which row decided.",
            show_default=False,
        ),
    ] = None,
    alpha: Annotated[
        str | None,
        typer.Option(
            "--alpha",
            metavar="NUMBER",
            help=f"Significance level; intervals are at 1 - alpha (default {DEFAULT_ALPHA}).",
            show_default=False,
        ),
    ] = None,
    margin: Annotated[
        str | None,
        typer.Option(
            "--margin",
            metavar="NUMBER",
            help="Largest pass-rate change counted as unchanged, as a fraction "
            f"(default {DEFAULT_MARGIN} = 10 points).",
            show_default=False,
        ),
    ] = None,
    adjust: Annotated[
        Adjust,
        typer.Option("--adjust", help="Multiple-comparison adjustment across scenarios."),
    ] = "holm",
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Also write the comparison as a self-contained HTML page to FILE.",
            show_default=False,
        ),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            metavar="URL",
            help="The history store for BASE 'blessed[:NAME]' and the quarantine (default: "
            "the current project's).",
            show_default=False,
        ),
    ] = None,
    gate_stable_nights: Annotated[
        str | None,
        typer.Option(
            "--gate-stable-nights",
            metavar="N",
            help="--fail-on counts only scenarios stable over their last N recorded runs.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Compare two runs: did HEAD's harness pass more or less often than BASE's?

    Per scenario and overall: pass rates over graded trials (executed minus
    infra-errors) with Wilson intervals, the difference with a Newcombe interval, a
    Fisher exact p-value adjusted across scenarios, and a verdict (improved,
    regressed, unchanged, inconclusive). BASE may be 'blessed' or 'blessed:NAME',
    the baseline blessed in the history for HEAD's host and model; --fail-on
    ignores quarantined scenarios. With --arms A,B, RUN's arm A is the baseline and
    its arm B the revision under test (docs/variants.md). Exit status: 0, or 1 when --fail-on trips;
    2 when a report cannot be read or an option is invalid; 3 when the Markdown
    summary cannot be written.
    """

    def action() -> int:
        return compare_command(
            base,
            head,
            as_json=as_json,
            markdown=markdown,
            html=html,
            fail_on=fail_on,
            alpha=alpha,
            margin=margin,
            adjust=adjust,
            history=history,
            gate_stable_nights=gate_stable_nights,
            arms=arms,
        )

    raise typer.Exit(guarded(action))


def compare_command(
    base: Path,
    head: Path | None,
    *,
    as_json: bool,
    markdown: Path | None,
    html: Path | None,
    fail_on: FailOn | None,
    alpha: str | None,
    margin: str | None,
    adjust: Adjust,
    history: str | None = None,
    gate_stable_nights: str | None = None,
    arms: str | None = None,
) -> int:
    """Compare two reports, write and print the comparison; return the exit status.

    BASE may be ``blessed[:NAME]``, read from the history store; ``--fail-on``
    leaves quarantined (and, with ``--gate-stable-nights``, unstable) scenarios out.
    With ``arms`` (``A,B``), BASE's arm A is compared with HEAD's (default BASE's) arm B.
    """
    from .._util.paths import display_path
    from ..deltas import explain_comparison
    from ..diagnostics import DiagnosticError, error
    from ..report import check_output_paths, load_report, report_path
    from ..report.compare import compare_reports
    from ..views.formats import COMPARE_WRITERS, PublishedComparison
    from .compare_sides import arm_sides, compare_sides

    check_output_paths({"--markdown": markdown, "--html": html})
    alpha_value = _fraction("--alpha", alpha, DEFAULT_ALPHA, allow_one=False)
    margin_value = _fraction("--margin", margin, DEFAULT_MARGIN, allow_one=True)
    if as_json and markdown == Path("-"):
        raise DiagnosticError(
            [error("invalid-option", "--json and --markdown - both want standard output")]
        )
    nights = positive_int("--gate-stable-nights", gate_stable_nights)
    if arms is not None:
        sides, head_report, head_file, head_label = arm_sides(base, head, arms, history)
    elif head is None:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    "compare needs BASE and HEAD (or RUN --arms A,B)",
                    expected="atlante-eval compare BASE HEAD, or atlante-eval compare RUN "
                    "--arms A,B",
                    next="name the revision under test, or two arms of a run with --arms",
                )
            ]
        )
    else:
        head_file = report_path(head)
        head_report = load_report(head_file)
        head_label = display_path(head_file)
        sides = compare_sides(base, head_report, history)
    result = compare_reports(
        sides.base,
        head_report,
        base_path=sides.base_path,
        head_path=head_label,
        alpha=alpha_value,
        margin=margin_value,
        adjust=adjust,
    )
    result = explain_comparison(
        result, sides.base, head_report, base_dir=sides.base_dir, head_dir=head_file.parent
    )
    print_diagnostics(result.diagnostics())
    gate = None
    if fail_on is not None:
        gate, notes = sides.gate(head_report, result, fail_on, stable_nights=nights)
        print_diagnostics(notes)
    if markdown is not None and markdown != Path("-"):
        COMPARE_WRITERS["markdown"].write(
            PublishedComparison(result), markdown, option="--markdown"
        )
    if html is not None:
        head_dir = head_file.parent.absolute()
        base_dir = sides.base_dir.absolute() if sides.base_dir is not None else None
        published = PublishedComparison(
            result, links_from=html.absolute().parent, run_dirs=(base_dir, head_dir)
        )
        COMPARE_WRITERS["html"].write(published, html, option="--html")
        typer.echo(f"html: {html}", err=True)  # stdout holds the comparison (or its JSON)
    _print_comparison(result, gate, as_json=as_json, markdown=markdown == Path("-"))
    if gate is not None:
        from ..views.compare_render import gate_line

        typer.echo(gate_line(result, gate.fail_on, rows=gate.decided_by), err=True)
    return 1 if gate is not None and gate.fails else 0


def _print_comparison(
    result: "CompareResult", gate: "GateDecision | None", *, as_json: bool, markdown: bool
) -> None:
    """The comparison on stdout: JSON (with the gate's decision), Markdown, or the table."""
    from ..views.compare_render import render_markdown, render_text
    from .compare_sides import with_gate

    if as_json:
        sys.stdout.write(with_gate(result, gate))
    elif markdown:
        sys.stdout.write(render_markdown(result))
    else:
        typer.echo(render_text(result, color=use_color(sys.stdout)))
    sys.stdout.flush()


@app.command()
def junit(
    report: ReportArg,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the XML to FILE (default, or '-': standard output).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Convert a report to JUnit XML: one testsuite per scenario, one testcase per trial.

    fail, timeout and budget-exceeded become <failure>, infra-error <error>,
    skipped-budget <skipped>. Exit status: 0, or 2 when the report cannot be read
    or --output names a path in a missing directory; 3 when the file cannot be
    written.
    """

    def action() -> int:
        from ..report import check_output_paths, load_report
        from ..views.formats import RUN_REPORT_WRITERS, PublishedReport

        check_output_paths({"--output": output})
        loaded = PublishedReport(load_report(report))
        writer = RUN_REPORT_WRITERS["junit"]
        if output is None or output == Path("-"):
            sys.stdout.buffer.write(writer.render(loaded))
            sys.stdout.flush()
        else:
            writer.write(loaded, output, option="--output")
        return 0

    raise typer.Exit(guarded(action))


@app.command()
def merge(
    reports: Annotated[
        list[Path],
        typer.Argument(
            metavar="REPORT",
            help="Every shard report of the run (report.json files or run directories).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Publish as DIR/<runId>/report.json, like run --out.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the merged report to FILE (never overwritten).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the merged report as JSON (also when --out or --output writes it).",
        ),
    ] = False,
) -> None:
    """Merge the shard reports of one run (run --shard I/N) into the whole run's report.

    Without --out or --output (or with --json) the merged report is printed as
    JSON. Exit status: 0, or 2 when a report cannot be read or the shards do not
    form one complete run; 3 when the merged report cannot be written.
    """

    def action() -> int:
        return merge_command(reports, out=out, output=output, as_json=as_json)

    raise typer.Exit(guarded(action))


def merge_command(
    reports: Sequence[Path], *, out: Path | None, output: Path | None, as_json: bool
) -> int:
    """Merge shard reports, publish or print the result; return the exit status."""
    from ..diagnostics import DiagnosticError, error
    from ..report import check_output_paths
    from ..report.merge import load_shards, merge_reports, publish_merged
    from ..views.progress import render_summary

    if out is not None and output is not None:
        raise DiagnosticError(
            [error("invalid-option", "--out and --output are alternatives; pass one")]
        )
    check_output_paths({"--output": output}, {"--out": out})
    shards = load_shards(reports)
    merged = merge_reports(shards)
    if out is None and output is None:
        sys.stdout.write(merged.to_json())
        sys.stdout.flush()
        return 0
    merged, path = publish_merged(merged, out=out, output=output)
    page = _merged_page(merged, path) if out is not None else None
    if as_json:
        typer.echo(f"merged {len(shards)} shard reports into {path}", err=True)
        if page is not None:
            typer.echo(f"html: {page}", err=True)
        sys.stdout.write(merged.to_json())
        sys.stdout.flush()
        return 0
    typer.echo(f"merged {len(shards)} shard reports")
    typer.echo(render_summary(merged, path, color=use_color(sys.stdout), html=page))
    return 0


def _merged_page(merged: "RunReport", path: Path) -> Path | None:
    """``report.html`` beside the published merged report; a failure is only a warning."""
    from ..diagnostics import DiagnosticError, warning
    from ..views.formats import publish_merged_page

    try:
        return publish_merged_page(merged, path)
    except DiagnosticError as exc:
        print_diagnostics(
            [
                warning(
                    d.code, f"report.html not written: {d.message}", source=d.source, next=d.next
                )
                for d in exc.diagnostics
            ]
        )
        return None


def _fraction(flag: str, raw: str | None, default: float, *, allow_one: bool) -> float:
    """Parse a number in (0, 1) (or (0, 1] with ``allow_one``) into a diagnostic on error."""
    from ..diagnostics import DiagnosticError, error

    if raw is None:
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value > 0.0 and (value <= 1.0 if allow_one else value < 1.0):
        return value
    bounds = "0 < value <= 1" if allow_one else "0 < value < 1"
    raise DiagnosticError(
        [
            error(
                "invalid-option",
                f"{flag} must be a number with {bounds}, got {raw}",
                expected=f"e.g. {flag} {default}",
            )
        ]
    )
