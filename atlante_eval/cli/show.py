"""``show``: look at a published run, a scenario's trials, or one trial."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._util.terminal import use_color
from .app import OutOption, app, guarded

if TYPE_CHECKING:
    from ..report import OutputModel

__all__ = ["show"]

# C1 controls and bidirectional overrides survive JSON encoding as raw characters;
# they are written as \\u escapes instead, which is still the same JSON string.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@app.command()
def show(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN",
            help="A run directory, its report.json, or a run id (default: the newest run "
            "of the project, selftests skipped).",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="SCENARIO[:I]",
            help="Show this scenario's trials, or with :I its trial I in full.",
            show_default=False,
        ),
    ] = None,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            metavar="PATH",
            help="The project whose runs to look in (default: current directory).",
            show_default=False,
        ),
    ] = None,
    out: OutOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the same data as JSON (see docs/cli.md).")
    ] = False,
) -> None:
    """Show a run: its overview, a scenario's trials, or one trial with its transcript.

    Exits 0, or 2 when the run, scenario or trial cannot be found or read.
    """

    def action() -> int:
        from ..report import load_report
        from ..views.show import locate_run, run_view, scenario_view, select, trial_view
        from ..views.show_render import make_console, render_run, render_scenario, render_trial

        path = locate_run(run, project=project, out=out)
        report = load_report(path)
        console = make_console(sys.stdout, color=use_color(sys.stdout))
        if target is None:
            overview = run_view(report, path)
            _emit(overview) if as_json else render_run(overview, console)
            return 0
        name, index = select(report, target)
        if index is None:
            listing = scenario_view(report, name)
            _emit(listing) if as_json else render_scenario(listing, console)
            return 0
        trial = trial_view(report, path, name, index)
        _emit(trial) if as_json else render_trial(trial, console)
        return 0

    raise typer.Exit(guarded(action))


def _emit(view: OutputModel) -> None:
    """Print ``view`` as 2-space JSON, terminal-active characters escaped."""
    document = view.model_dump_json(by_alias=True, indent=2)
    sys.stdout.write(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document) + "\n")
    sys.stdout.flush()
