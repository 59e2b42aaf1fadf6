"""``show``: look at a published run, a scenario's trials, or one trial."""

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._util.terminal import use_color
from .app import OutOption, app, guarded

if TYPE_CHECKING:
    from rich.console import Console

    from ..report import OutputModel, RunReport

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
            help="A run directory, its report.json, a run id, or a project directory (its "
            "newest run; default: the current project's, selftests skipped). A lone "
            "SCENARIO[:I] shows that scenario of the newest run.",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="SCENARIO[@ARM][:I]",
            help="Show this scenario's trials, or with :I its trial I in full; with @ARM, "
            "those of that arm (eval.variants; default the control).",
            show_default=False,
        ),
    ] = None,
    diff_target: Annotated[
        str | None,
        typer.Argument(
            metavar="SCENARIO[:I:J]",
            help="With --diff: the scenario, and optionally the trial of each run.",
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
    diff: Annotated[
        bool,
        typer.Option(
            "--diff",
            help="show --diff BASE HEAD SCENARIO[:I:J]: two trials' timelines side by side, "
            "aligned, the first divergence marked (default: each run's typical trial).",
        ),
    ] = False,
    files: Annotated[
        bool,
        typer.Option(
            "--files",
            help="With SCENARIO:I: show the files the trial left, from its stored final state.",
        ),
    ] = False,
) -> None:
    """Show a run: its overview, a scenario's trials, or one trial with its transcript.

    With --diff, put a trial of BASE and one of HEAD side by side. Exits 0, or 2
    when a run, scenario or trial cannot be found or read.
    """

    def action() -> int:
        from ..report import arm_names, load_report, trial_key
        from ..views.show import (
            resolve,
            run_view,
            scenario_view,
            select,
            select_arm,
            trial_view,
        )
        from ..views.show_render import make_console, render_run, render_scenario, render_trial

        if diff or diff_target is not None:
            return _diff(
                run, target, diff_target, diff=diff, project=project, out=out, as_json=as_json
            )
        path, chosen = resolve(run, target, project=project, out=out)
        report = load_report(path)
        console = make_console(sys.stdout, color=use_color(sys.stdout))
        if files:
            name, index = select(report, chosen) if chosen is not None else ("SCENARIO", None)
            return _files(report, path, name, index, console, as_json=as_json)
        if chosen is None:
            overview = run_view(report, path)
            _emit(overview) if as_json else render_run(overview, console)
            return 0
        arm_report, chosen, arm = select_arm(report, chosen)
        name, index = select(arm_report, chosen)
        if index is None:
            listing = scenario_view(arm_report, name, arm=arm, arms=arm_names(report))
            _emit(listing) if as_json else render_scenario(listing, console)
            return 0
        key = trial_key(report, name, arm)
        trial = trial_view(arm_report, path, name, index, key=key)
        _emit(trial) if as_json else render_trial(trial, console)
        return 0

    raise typer.Exit(guarded(action))


def _files(
    report: "RunReport",
    path: Path,
    name: str,
    index: int | None,
    console: "Console",
    *,
    as_json: bool,
) -> int:
    """``--files``: the trial's stored final files (a trial must be named)."""
    from ..diagnostics import DiagnosticError, error
    from ..views.final_files import files_view, render_files

    if index is None:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    "--files shows one trial's files: name it as SCENARIO:I",
                    next=f"pass {name}:I, e.g. `atlante-eval show RUN {name}:0 --files`",
                )
            ]
        )
    view = files_view(report, path, name, index)
    _emit(view) if as_json else render_files(view, console)
    return 0


def _diff(
    base: str | None,
    head: str | None,
    target: str | None,
    *,
    diff: bool,
    project: Path | None,
    out: Path | None,
    as_json: bool,
) -> int:
    """``show --diff BASE HEAD SCENARIO[:I:J]``."""
    from ..diagnostics import DiagnosticError, error
    from ..report import load_report
    from ..views.show import locate_run
    from ..views.show_render import make_console
    from ..views.trial_diff import parse_diff_target, trial_diff_view
    from ..views.trial_diff_render import render_trial_diff

    if not diff or base is None or head is None or target is None:
        message = (
            "--diff needs BASE, HEAD and SCENARIO" if diff else "a third argument needs --diff"
        )
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    message,
                    expected="atlante-eval show --diff BASE HEAD SCENARIO[:I:J]",
                    next="name two runs (directories, report.json files or run ids) and a "
                    "scenario both have",
                )
            ]
        )
    base_file = locate_run(base, project=project, out=out)
    head_file = locate_run(head, project=project, out=out)
    base_report, head_report = load_report(base_file), load_report(head_file)
    name, first, second = parse_diff_target(base_report, head_report, target)
    view = trial_diff_view(
        (base_report, base_file), (head_report, head_file), name, (first, second)
    )
    if as_json:
        _emit(view)
    else:
        render_trial_diff(view, make_console(sys.stdout, color=use_color(sys.stdout)))
    return 0


def _emit(view: "OutputModel") -> None:
    """Print ``view`` as 2-space JSON, terminal-active characters escaped."""
    document = view.model_dump_json(by_alias=True, indent=2)
    sys.stdout.write(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document) + "\n")
    sys.stdout.flush()
