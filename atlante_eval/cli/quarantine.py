"""``history quarantine add|remove|list``: scenarios the ``--fail-on`` gates ignore.

A quarantined scenario still runs and is reported; ``compare --fail-on`` leaves it
out and says so. ``--until DATE`` ends a quarantine by itself after that day.
"""

from typing import Annotated

import typer

from .app import guarded, print_json
from .history import (
    ByOption,
    HistoryOption,
    JsonOption,
    ProjectOption,
    day_option,
    quarantine_app,
    store_location,
)

__all__ = ["quarantine_add", "quarantine_list", "quarantine_remove"]


@quarantine_app.command("add")
def quarantine_add(
    scenario: Annotated[str, typer.Argument(metavar="SCENARIO", help="The scenario name.")],
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT", help="Why (recorded).")],
    owner: Annotated[
        str | None,
        typer.Option("--owner", metavar="NAME", help="Who is fixing it.", show_default=False),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="DATE",
            help="Last day of the quarantine (YYYY-MM-DD, UTC); it ends by itself after.",
            show_default=False,
        ),
    ] = None,
    by: ByOption = None,
    history: HistoryOption = None,
    project: ProjectOption = None,
) -> None:
    """Quarantine a scenario: it still runs and is reported, --fail-on gates ignore it."""

    def action() -> int:
        from .._util.terminal import printable
        from ..diagnostics import DiagnosticError, error
        from ..history.quarantine import today
        from ..history.store import open_store

        last_day = day_option("--until", until)
        if last_day is not None and last_day.isoformat() < today():
            raise DiagnosticError(
                [
                    error(
                        "invalid-option", f"--until {until} is in the past (today is {today()} UTC)"
                    )
                ]
            )
        if not reason.strip() or not scenario.strip():
            raise DiagnosticError(
                [error("invalid-option", "SCENARIO and --reason must not be empty")]
            )
        with open_store(store_location(history, project, must_exist=False)) as store:
            held = store.quarantine(
                scenario, reason=reason.strip(), owner=owner, until=last_day, by=by
            )
        typer.echo(
            printable(
                f"quarantined {held.scenario}"
                + (f" until {held.until}" if held.until else "")
                + f": {held.reason}"
            )
        )
        return 0

    raise typer.Exit(guarded(action))


@quarantine_app.command("remove")
def quarantine_remove(
    scenario: Annotated[str, typer.Argument(metavar="SCENARIO", help="The scenario name.")],
    by: ByOption = None,
    history: HistoryOption = None,
    project: ProjectOption = None,
) -> None:
    """End a scenario's quarantine: gates count it again."""

    def action() -> int:
        from .._util.terminal import printable
        from ..diagnostics import DiagnosticError, error
        from ..history.store import open_store

        with open_store(store_location(history, project, must_exist=True)) as store:
            ended = store.release(scenario, by=by)
        if not ended:
            raise DiagnosticError(
                [
                    error(
                        "history-not-found",
                        f"{scenario!r} is not quarantined",
                        next="see `atlante-eval history quarantine list`",
                    )
                ]
            )
        typer.echo(printable(f"released {scenario} from quarantine"))
        return 0

    raise typer.Exit(guarded(action))


@quarantine_app.command("list")
def quarantine_list(
    everything: Annotated[
        bool, typer.Option("--all", help="Also removed and expired quarantines.")
    ] = False,
    history: HistoryOption = None,
    project: ProjectOption = None,
    as_json: JsonOption = False,
) -> None:
    """List quarantined scenarios (those in force; --all: every one ever)."""

    def action() -> int:
        from ..history.store import open_store
        from ..views.history_render import render_quarantines

        with open_store(store_location(history, project, must_exist=True)) as store:
            held = store.quarantines(everything=everything)
        if as_json:
            print_json([q.model_dump(mode="json", by_alias=True) for q in held])
        else:
            typer.echo(render_quarantines(held))
        return 0

    raise typer.Exit(guarded(action))
