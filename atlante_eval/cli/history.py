"""``history``: record reports in the history store and read it back.

``history ingest``, ``list``, ``show``, ``flaky``, ``bless``, ``baselines`` and
``quarantine add|remove|list``. The store is ``--history URL``, else the
project's ``eval.history``, else ``<project>/.atlante/eval/history.sqlite``
(the project: ``--project PATH``, default the current directory).
"""

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .app import _App, app, guarded, positive_int, print_diagnostics, print_json

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic
    from ..history import HistoryLocation
    from ..history.ingest import IngestResult
    from ..history.store import HistoryStore, RunFilter

__all__ = [
    "ByOption",
    "HistoryOption",
    "JsonOption",
    "ProjectOption",
    "day_option",
    "history_app",
    "quarantine_app",
    "store_location",
]

_SETTINGS = {"help_option_names": ["-h", "--help"]}
history_app = _App(
    name="history",
    help="The history store: record runs, read trends and flaky scenarios, bless "
    "baselines, quarantine scenarios (docs/history.md).",
    no_args_is_help=True,
    context_settings=_SETTINGS,
)
quarantine_app = _App(
    name="quarantine",
    help="Scenarios that still run and are reported, but --fail-on gates ignore.",
    no_args_is_help=True,
    context_settings=_SETTINGS,
)
history_app.add_typer(quarantine_app)
app.add_typer(history_app)

HistoryOption = Annotated[
    str | None,
    typer.Option(
        "--history",
        metavar="URL",
        help="The store: a SQLite path or postgresql://... (default: eval.history, else "
        "<project>/.atlante/eval/history.sqlite).",
        show_default=False,
    ),
]
ProjectOption = Annotated[
    Path | None,
    typer.Option(
        "--project",
        metavar="PATH",
        help="The project whose store is used (default: the current directory).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
HostOption = Annotated[
    str | None, typer.Option("--host", help="Only runs of this host.", show_default=False)
]
ModelOption = Annotated[
    str | None, typer.Option("--model", help="Only runs of this model.", show_default=False)
]
ArmOption = Annotated[
    str | None,
    typer.Option("--arm", help="Only runs of this arm (variant).", show_default=False),
]
ByOption = Annotated[
    str | None,
    typer.Option(
        "--by",
        metavar="NAME",
        help="Who is acting (default: $GITHUB_ACTOR, else the user name).",
        show_default=False,
    ),
]


def store_location(
    history: str | None, project: Path | None, *, must_exist: bool
) -> "HistoryLocation":
    """The store a history command uses (``--history``, ``eval.history``, the default).

    Raises:
        DiagnosticError: ``history-not-configured`` or ``history-invalid-url`` (exit 2);
            ``history-not-found`` (exit 2) for a SQLite file a reading command finds absent.
    """
    from ..diagnostics import DiagnosticError, error
    from ..history import history_location, parse_history_url
    from ..project.config import load_project

    if history is not None:
        location = parse_history_url(history)
    else:
        try:
            loaded = load_project(project)
        except DiagnosticError as exc:
            if exc.diagnostics[0].code != "eval-not-configured":
                raise
            raise DiagnosticError(
                [
                    error(
                        "history-not-configured",
                        f"no history store: {exc.diagnostics[0].message}",
                        next="pass --history URL (a SQLite file or postgresql://...), or "
                        "--project PATH",
                    )
                ]
            ) from None
        found = history_location(None, configured=loaded.eval.history, project_root=loaded.root)
        if found is None:
            raise DiagnosticError(
                [
                    error(
                        "history-not-configured",
                        "the project records no history (eval.history is false)",
                        source=loaded.source,
                        next="pass --history URL",
                    )
                ]
            )
        location = found
    if must_exist and location.path is not None and not location.path.exists():
        raise DiagnosticError(
            [
                error(
                    "history-not-found",
                    f"no history store at {location.display}: no run was recorded yet",
                    next="run `atlante-eval run`, or record reports with "
                    "`atlante-eval history ingest REPORT...`",
                )
            ]
        )
    return location


def day_option(flag: str, raw: str | None) -> date | None:
    from ..diagnostics import DiagnosticError, error

    if raw is None:
        return None
    try:
        return date.fromisoformat(raw.strip())
    except ValueError:
        raise DiagnosticError(
            [error("invalid-option", f"{flag} must be a date YYYY-MM-DD, got {raw}")]
        ) from None


def _filter(
    host: str | None,
    model: str | None,
    arm: str | None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
) -> "RunFilter":
    from ..history.store import RunFilter

    first, last = day_option("--since", since), day_option("--until", until)
    return RunFilter(
        host=host,
        model=model,
        arm=arm,
        since=first.isoformat() if first else None,
        until=last.isoformat() if last else None,
        limit=limit,
    )


@history_app.command()
def ingest(
    reports: Annotated[
        list[Path],
        typer.Argument(
            metavar="REPORT",
            help="report.json files, run directories, or directories of run directories "
            "(reference reports and merged shards too).",
            show_default=False,
        ),
    ],
    alert_webhook: Annotated[
        str | None,
        typer.Option(
            "--alert-webhook",
            metavar="URL",
            help="After recording, alert here as `run` does when a newly recorded run "
            "regressed against the blessed baseline (and write $GITHUB_STEP_SUMMARY).",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline", metavar="NAME", help="The blessed baseline alerts compare with."
        ),
    ] = "default",
    history: HistoryOption = None,
    project: ProjectOption = None,
    as_json: JsonOption = False,
) -> None:
    """Record reports in the history; recording the same run twice keeps one run.

    A merged report supersedes its shards already recorded, a resumed run the
    interrupted run it finished. With --alert-webhook, each newly recorded run is
    compared with its blessed baseline and alerted on as `run` does (a failed alert
    is a warning). Exit status: 0; 2 for an unreadable report or an invalid option;
    3 when the store cannot be used.
    """

    def action() -> int:
        from ..history.store import open_store
        from ..views.history_render import render_ingested

        location = store_location(history, project, must_exist=False)
        results: list[IngestResult] = []
        notes: list[Diagnostic] = []
        alerts: list[str] = []
        with open_store(location) as store:
            for path in reports:
                done, said = store.ingest_path(path)
                results.extend(done)
                notes.extend(said)
            if alert_webhook is not None:
                alerts, said = _alert(store, location, results, alert_webhook, baseline)
                notes.extend(said)
        print_diagnostics(notes)
        for line in alerts:
            typer.echo(line, err=as_json)
        if as_json:
            print_json(
                [
                    {
                        "runId": r.run_id,
                        "status": r.status,
                        "trials": r.trials,
                        "absorbed": r.absorbed,
                    }
                    for r in results
                ]
            )
        else:
            typer.echo(render_ingested(results) if results else "nothing recorded")
        return 0

    raise typer.Exit(guarded(action))


def _alert(
    store: "HistoryStore",
    location: "HistoryLocation",
    results: "list[IngestResult]",
    webhook: str,
    baseline: str,
) -> "tuple[list[str], list[Diagnostic]]":
    """Alert on each newly recorded run, as ``run`` does after recording itself."""
    import os

    from ..run.record import Recording, alert_after, expand_webhook
    from .run import history_lines

    recording = Recording(
        location=location,
        webhook=expand_webhook(webhook),
        baseline=baseline,
        step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
    )
    lines: list[str] = []
    notes: list[Diagnostic] = []
    for result in results:
        if result.status == "unchanged":
            continue
        outcome = alert_after(store, recording, store.report(result.run_id), None)
        lines.extend(history_lines(outcome))
        notes.extend(outcome.notes)
    return lines, notes


@history_app.command("list")
def list_runs(
    host: HostOption = None,
    model: ModelOption = None,
    arm: ArmOption = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="DATE", help="From this day (YYYY-MM-DD, UTC).", show_default=False
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until", metavar="DATE", help="Up to this day (YYYY-MM-DD, UTC).", show_default=False
        ),
    ] = None,
    limit: Annotated[
        str | None,
        typer.Option(
            "--limit", metavar="N", help="The newest N runs (default 50).", show_default=False
        ),
    ] = None,
    history: HistoryOption = None,
    project: ProjectOption = None,
    as_json: JsonOption = False,
) -> None:
    """List recorded runs, newest first: condition, harness, trials, partial/resumed/adaptive."""

    def action() -> int:
        from ..history.store import open_store
        from ..views.history_render import render_runs

        where = _filter(host, model, arm, since, until, positive_int("--limit", limit) or 50)
        with open_store(store_location(history, project, must_exist=True)) as store:
            runs = store.runs(where)
        if as_json:
            print_json([r.model_dump(mode="json", by_alias=True) for r in runs])
        else:
            typer.echo(render_runs(runs))
        return 0

    raise typer.Exit(guarded(action))


LastOption = Annotated[
    str | None,
    typer.Option("--last", metavar="N", help="The last N runs.", show_default=False),
]


@history_app.command()
def show(
    scenario: Annotated[str, typer.Argument(metavar="SCENARIO", help="The scenario name.")],
    last: LastOption = None,
    host: HostOption = None,
    model: ModelOption = None,
    arm: ArmOption = None,
    history: HistoryOption = None,
    project: ProjectOption = None,
    as_json: JsonOption = False,
) -> None:
    """A scenario over its last N runs (default 10): pass rates with intervals, flips,
    the first failing run of the current streak, its quarantine.
    """

    def action() -> int:
        from ..diagnostics import DiagnosticError, error
        from ..history.store import open_store
        from ..views.history_render import render_scenario_history

        count = positive_int("--last", last) or 10
        with open_store(store_location(history, project, must_exist=True)) as store:
            found = store.scenario(scenario, last=count, where=_filter(host, model, arm))
        if found is None:
            raise DiagnosticError(
                [
                    error(
                        "history-not-found",
                        f"no recorded run ran a scenario named {scenario!r}",
                        next="see the runs with `atlante-eval history list`",
                    )
                ]
            )
        if as_json:
            print_json(found.model_dump(mode="json", by_alias=True))
        else:
            typer.echo(render_scenario_history(found))
        return 0

    raise typer.Exit(guarded(action))


@history_app.command()
def flaky(
    last: LastOption = None,
    min_runs: Annotated[
        str | None,
        typer.Option(
            "--min-runs",
            metavar="N",
            help="Only scenarios graded in at least N runs (default 2).",
            show_default=False,
        ),
    ] = None,
    host: HostOption = None,
    model: ModelOption = None,
    arm: ArmOption = None,
    history: HistoryOption = None,
    project: ProjectOption = None,
    as_json: JsonOption = False,
) -> None:
    """Scenarios whose outcome flips across the last N runs (default 20), most flips first."""

    def action() -> int:
        from ..history.store import open_store
        from ..views.history_render import render_flaky

        count = positive_int("--last", last) or 20
        least = positive_int("--min-runs", min_runs) or 2
        with open_store(store_location(history, project, must_exist=True)) as store:
            found = store.flaky(last=count, where=_filter(host, model, arm), min_runs=least)
        if as_json:
            print_json([f.model_dump(mode="json", by_alias=True) for f in found])
        else:
            typer.echo(render_flaky(found))
        return 0

    raise typer.Exit(guarded(action))


@history_app.command()
def bless(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="A recorded run id, or a report.json / run directory (recorded first).",
        ),
    ],
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="Why this run is accepted (recorded).")
    ],
    name: Annotated[
        str,
        typer.Option("--name", metavar="NAME", help="The baseline's name (compare blessed:NAME)."),
    ] = "default",
    by: ByOption = None,
    history: HistoryOption = None,
    project: ProjectOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mark a run as the accepted baseline for its host, model and arm.

    `compare blessed[:NAME] HEAD` and `run --against blessed[:NAME]` compare with
    it. Every blessing is kept: who, when and why.
    """

    def action() -> int:
        from ..diagnostics import DiagnosticError, error
        from ..history.store import open_store

        if not reason.strip() or not name.strip():
            raise DiagnosticError(
                [error("invalid-option", "--reason and --name must not be empty")]
            )
        with open_store(store_location(history, project, must_exist=False)) as store:
            run_id = run
            if Path(run).exists():
                results, notes = store.ingest_path(Path(run))
                print_diagnostics(notes)
                if len(results) != 1:
                    raise DiagnosticError(
                        [
                            error(
                                "invalid-option",
                                f"{run} holds {len(results)} run reports; bless one",
                            )
                        ]
                    )
                run_id = results[0].run_id
            blessing = store.bless(run_id, name=name.strip(), reason=reason.strip(), by=by)
        if as_json:
            print_json(blessing.model_dump(mode="json", by_alias=True))
        else:
            from .._util.terminal import printable

            typer.echo(
                printable(
                    f"blessed {blessing.run_id} as baseline {blessing.name} for "
                    f"{blessing.host} · {blessing.model}"
                )
            )
        return 0

    raise typer.Exit(guarded(action))


@history_app.command()
def baselines(
    everything: Annotated[
        bool, typer.Option("--all", help="Every blessing ever, oldest first.")
    ] = False,
    history: HistoryOption = None,
    project: ProjectOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the blessed baselines in force (or every blessing with --all)."""

    def action() -> int:
        from ..history.store import open_store
        from ..views.history_render import render_blessings

        with open_store(store_location(history, project, must_exist=True)) as store:
            found = store.blessings(everything=everything)
        if as_json:
            print_json([b.model_dump(mode="json", by_alias=True) for b in found])
        else:
            typer.echo(render_blessings(found))
        return 0

    raise typer.Exit(guarded(action))
