"""``regrade``: judge a finished run again with the scenarios' current checks, no session."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._util.terminal import use_color
from .app import OutOption, app, guarded, print_diagnostics

if TYPE_CHECKING:
    from ..run.regrade import RegradeOutcome

__all__ = ["regrade"]


@app.command()
def regrade(
    run_dir: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR",
            help="The run directory (or its report.json) whose trials to judge again.",
            show_default=False,
        ),
    ],
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            metavar="NAME",
            help="Regrade only this scenario (repeatable; glob patterns allowed).",
            show_default=False,
        ),
    ] = None,
    out: OutOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the new report JSON instead of the summary.")
    ] = False,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            metavar="PATH",
            help="The project whose scenarios hold the checks (default: current directory).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Apply the scenarios' current checks to a run's stored trials; no host session starts.

    Each graded trial's sandbox is rebuilt from its stored final state and graded
    again (file, diff-allowlist, command and behaviour checks); a new report is
    published with meta.regradedFrom. Exit status: 0 every trial passed; 1 a trial
    did not; 2 the run or project cannot be read, or a scenario's task changed
    beyond its checks; 3 isolation is unavailable or the report cannot be written.
    """

    def action() -> int:
        import anyio

        from ..report import check_output_paths
        from ..run.regrade import regrade_run

        check_output_paths({}, {"--out": out})
        outcome = anyio.run(
            lambda: regrade_run(run_dir, project=project, scenarios=scenario or (), out=out)
        )
        print_diagnostics(outcome.warnings)
        _print(outcome, as_json=as_json)
        return outcome.report.exit_code()

    raise typer.Exit(guarded(action))


def _print(outcome: "RegradeOutcome", *, as_json: bool) -> None:
    from ..views.progress import render_summary
    from ..views.regrade_render import regrade_lines

    if as_json:
        sys.stdout.write(outcome.report.to_json())
        sys.stdout.flush()
        return
    page = outcome.html
    typer.echo(
        render_summary(
            outcome.report,
            outcome.path,
            color=use_color(sys.stdout),
            html=page if page is not None and page.is_file() else None,
        )
    )
    for line in regrade_lines(outcome.original, outcome.report):
        typer.echo(line)
