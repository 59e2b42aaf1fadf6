"""``run``: evaluate the harness and publish the report."""

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._util.terminal import printable, use_color
from ..choices import LogFormat, ShardBalancing
from .app import (
    GATEWAY_METAVAR,
    ISOLATION_METAVAR,
    HostVersionOption,
    OutOption,
    PathArg,
    app,
    guarded,
    print_diagnostics,
)

if TYPE_CHECKING:
    import anyio

    from ..report import ProgressEvent, RunReport
    from ..run import RunOptions
    from ..run.prepare import ProgressCallback
    from ..run.record import RecordOutcome
    from ..run.runner import RunControl, RunOutcome

__all__ = ["run", "run_command"]


@app.command()
def run(
    path: PathArg = None,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            metavar="NAME",
            help="Run only this scenario (repeatable; glob patterns allowed).",
            show_default=False,
        ),
    ] = None,
    trials: Annotated[
        str | None,
        typer.Option(
            "--trials", metavar="N", help="Trials per scenario (1-50).", show_default=False
        ),
    ] = None,
    jobs: Annotated[
        str | None,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            help="Host sessions run at once (default 4); as many more trials get ready ahead.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report JSON instead of the summary.")
    ] = False,
    out: OutOption = None,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep trial sandboxes; their paths are printed and recorded."),
    ] = False,
    pass_env: Annotated[
        list[str] | None,
        typer.Option(
            "--pass-env",
            metavar="NAME",
            help="Hand this environment variable to the host session (repeatable).",
            show_default=False,
        ),
    ] = None,
    retry_infra: Annotated[
        str | None,
        typer.Option(
            "--retry-infra",
            metavar="N",
            help="Rerun a trial up to N times while it ends in infra-error.",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="RUN_DIR",
            help="Reuse the trials of an earlier run directory whose fingerprint still matches.",
            show_default=False,
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="I/N",
            help="Run only slice I of N of the trial plan.",
            show_default=False,
        ),
    ] = None,
    balance: Annotated[
        ShardBalancing,
        typer.Option(
            "--balance",
            help="How --shard splits the plan: round-robin, or duration (every shard expected "
            "to take about as long, by the trial durations of --balance-from).",
        ),
    ] = "round-robin",
    balance_from: Annotated[
        Path | None,
        typer.Option(
            "--balance-from",
            metavar="REPORT",
            help="--balance duration: the earlier report (or run directory) whose trial "
            "durations are the estimates; the same file on every shard.",
            show_default=False,
        ),
    ] = None,
    last_failed: Annotated[
        bool,
        typer.Option("--last-failed", help="Run only scenarios that did not fully pass last time."),
    ] = False,
    against: Annotated[
        Path | None,
        typer.Option(
            "--against",
            metavar="BASELINE_REPORT",
            help="Adaptive runs: the baseline report (or run directory) to compare with.",
            show_default=False,
        ),
    ] = None,
    until_decided: Annotated[
        bool,
        typer.Option(
            "--until-decided",
            help="Add trials to undecided scenarios until the comparison with --against is "
            "decided (improved, regressed, or unchanged within --margin).",
        ),
    ] = False,
    min_trials: Annotated[
        str | None,
        typer.Option(
            "--min-trials",
            metavar="N",
            help="Adaptive runs: trials per scenario at the first look (default: --trials).",
            show_default=False,
        ),
    ] = None,
    max_trials: Annotated[
        str | None,
        typer.Option(
            "--max-trials",
            metavar="N",
            help="Adaptive runs: most trials per scenario (1-50, default 50).",
            show_default=False,
        ),
    ] = None,
    max_cost: Annotated[
        str | None,
        typer.Option(
            "--max-cost",
            metavar="USD",
            help="Adaptive runs: add no wave once the host-reported cost reaches USD.",
            show_default=False,
        ),
    ] = None,
    margin: Annotated[
        str | None,
        typer.Option(
            "--margin",
            metavar="M",
            help="Adaptive runs: largest change counted as unchanged (default 0.1).",
            show_default=False,
        ),
    ] = None,
    alpha: Annotated[
        str | None,
        typer.Option(
            "--alpha",
            metavar="A",
            help="Adaptive runs: error rate over all looks (default 0.05).",
            show_default=False,
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            metavar="FILE",
            help="Also write the report as JUnit XML to FILE (after it is published).",
            show_default=False,
        ),
    ] = None,
    log_format: Annotated[
        LogFormat,
        typer.Option("--log-format", help="Structured run logs on stderr: none, console or json."),
    ] = "none",
    no_html: Annotated[
        bool,
        typer.Option("--no-html", help="Do not write report.html beside report.json."),
    ] = False,
    isolation: Annotated[
        str | None,
        typer.Option(
            "--isolation",
            metavar=ISOLATION_METAVAR,
            help="Contain each trial: none (tool policy only) or os (namespaces and a "
            "network allow list; Linux, bubblewrap). Default: eval.isolation, else none.",
            show_default=False,
        ),
    ] = None,
    gateway: Annotated[
        str | None,
        typer.Option(
            "--gateway",
            metavar=GATEWAY_METAVAR,
            help="Send each trial's model calls through the engine's gateway, which meters "
            "them from the provider's responses and keeps API keys out of the sandbox (on), "
            "or let the host call its provider directly (off). Default: eval.gateway, else on.",
            show_default=False,
        ),
    ] = None,
    no_history: Annotated[
        bool,
        typer.Option("--no-history", help="Do not record the run in the history store."),
    ] = False,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            metavar="URL",
            help="The history store (a SQLite path or postgresql://...) instead of "
            "eval.history (default .atlante/eval/history.sqlite).",
            show_default=False,
        ),
    ] = None,
    alert_webhook: Annotated[
        str | None,
        typer.Option(
            "--alert-webhook",
            metavar="URL",
            help="POST a JSON alert here when a scenario regressed against the blessed "
            "baseline (instead of eval.alerts.webhook).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        list[str] | None,
        typer.Option(
            "--limit",
            metavar="KEY=VALUE",
            help="A per-trial resource limit, over eval.limits (repeatable): memoryMb=N, "
            "pids=N, cpus=X, tmpMb=N, or KEY=unlimited.",
            show_default=False,
        ),
    ] = None,
    host_version: HostVersionOption = None,
    variant: Annotated[
        list[str] | None,
        typer.Option(
            "--variant",
            metavar="NAME",
            help="Run only this arm of eval.variants (repeatable; docs/variants.md).",
            show_default=False,
        ),
    ] = None,
    variants: Annotated[
        str | None,
        typer.Option(
            "--variants",
            metavar="none|all",
            help="Run every arm of eval.variants (all, the default) or none of them (none).",
            show_default=False,
        ),
    ] = None,
    no_final_state: Annotated[
        bool,
        typer.Option(
            "--no-final-state",
            help="Do not store each trial's final files (then `regrade` cannot re-check them).",
        ),
    ] = False,
    final_state_cap: Annotated[
        str | None,
        typer.Option(
            "--final-state-cap",
            metavar="SIZE",
            help="Most file content one trial's final state may hold (default 256M); "
            "a trial over it cannot be regraded.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run every selected scenario's trials on the configured host and publish the report.

    Exit status: 0 every trial passed; 1 a trial failed, timed out, exceeded its
    budget, hit an infra-error or was skipped; 2 validation failed; 3 the run could
    not start or finish (host unavailable, interrupted, report not written).
    """

    def action() -> int:
        from ..run import run_options

        options = run_options(  # each flag to its field: the field's validator reads it
            scenarios=scenario,
            trials=trials,
            jobs=jobs,
            out=out,
            keep=keep,
            pass_env=pass_env,
            retry_infra=retry_infra,
            resume=resume,
            shard=shard,
            balance=balance,
            balance_from=balance_from,
            last_failed=last_failed,
            against=against,
            until_decided=until_decided,
            min_trials=min_trials,
            max_trials=max_trials,
            max_cost=max_cost,
            margin=margin,
            alpha=alpha,
            html=not no_html,
            isolation=isolation,
            gateway=gateway,
            history=not no_history,
            history_url=history,
            alert_webhook=alert_webhook,
            limits=limit,
            host_version=host_version,
            variants=_arm_selection(variant, variants),
            final_state=not no_final_state,
            final_state_cap=final_state_cap,
        )
        return run_command(path, options, as_json=as_json, junit=junit, log_format=log_format)

    # The garbage collector stays held until the first trial starts (_collecting).
    raise typer.Exit(guarded(action, collect=False))


def _arm_selection(names: list[str] | None, mode: str | None) -> object:
    """``--variant NAME...`` or ``--variants none|all`` as the one ``variants`` option.

    Raises:
        DiagnosticError: ``invalid-option`` when both are given, or ``--variants`` is
            neither ``none`` nor ``all`` (exit 2).
    """
    from ..diagnostics import DiagnosticError, error

    if names and mode is not None:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    "--variant and --variants cannot be combined",
                    next="name the arms with --variant, or use --variants none|all alone",
                )
            ]
        )
    if mode is not None and mode not in ("none", "all"):
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"--variants must be none or all, got {mode!r}",
                    expected="none, all",
                    next="name single arms with --variant NAME",
                )
            ]
        )
    return tuple(names) if names else mode


def run_command(
    path: Path | None,
    options: "RunOptions",
    *,
    as_json: bool = False,
    junit: Path | None = None,
    log_format: LogFormat = "none",
) -> int:
    """Run with ``options``, printing progress and the outcome; return the exit status."""
    import anyio

    from .._util.logs import configure_logging
    from .._util.memory import cap_malloc_arenas, resume_collection
    from ..report import check_output_paths

    try:
        cap_malloc_arenas()  # before the run's threads start
        configure_logging(log_format)
        check_output_paths({"--junit": junit}, {"--out": options.out})
        return anyio.run(_run_async, path, options, as_json, junit, log_format == "json")
    finally:
        resume_collection()  # a run that started no trial


def _collecting(sink: "ProgressCallback") -> "ProgressCallback":
    """``sink``, turning the garbage collector back on when the first trial starts.

    ``main`` holds the collector while the CLI starts (``_util/memory.py``); a
    run's launch is start-up too, up to its first trial's session.
    """
    from .._util.memory import resume_collection
    from ..report import TrialStarted

    def on_event(event: "ProgressEvent") -> object:
        if isinstance(event, TrialStarted):
            resume_collection()
        return sink(event)

    return on_event


async def _run_async(
    path: Path | None,
    options: "RunOptions",
    as_json: bool,
    junit: Path | None = None,
    json_logs: bool = False,
) -> int:
    import anyio

    from .._util.threads import cap_worker_threads
    from ..diagnostics import DiagnosticError
    from ..run.runner import EvalRunError, RunControl, execute_run
    from ..views.progress import ProgressPrinter

    cap_worker_threads()  # this loop is the CLI's own (_util/threads.py)
    control = RunControl()
    # With JSON logs, progress lines are log events too: stderr stays one JSON stream.
    printer = ProgressPrinter(sys.stderr, structured=json_logs)
    outcome: RunOutcome | None = None
    failure: EvalRunError | None = None
    refused: DiagnosticError | None = None
    with printer:
        async with anyio.create_task_group() as group:
            group.start_soon(_watch_signals, control, group.cancel_scope)
            try:
                outcome = await execute_run(
                    path, options, on_event=_collecting(printer), control=control
                )
            except EvalRunError as exc:
                failure = exc
            except DiagnosticError as exc:
                refused = exc
            finally:
                group.cancel_scope.cancel()
    if refused is not None:
        raise refused
    if failure is not None:
        _print_outcome(failure.report, failure.report_path, as_json=as_json)
        junit_failed = _write_junit(failure.report, junit)
        print_diagnostics(failure.diagnostics)
        return max(failure.exit_code, junit_failed)
    assert outcome is not None
    _print_outcome(outcome.report, outcome.path, as_json=as_json)
    if outcome.history is not None:
        # On stderr, as the progress is: stdout keeps the summary (or the report JSON).
        for line in history_lines(outcome.history):
            typer.echo(line, err=True)
    return _write_junit(outcome.report, junit) or outcome.report.exit_code()


def history_lines(outcome: "RecordOutcome") -> list[str]:
    """What the after-run step has to say beyond warnings: an alert it sent (or not).

    Recording itself is silent (the outputs of a run stay as they were); problems are
    warnings, printed with the progress.
    """
    if outcome.alert is None:
        return []
    names = ", ".join(s.scenario for s in outcome.alert.regressed)
    state = "sent" if outcome.alert_sent else "not sent"
    return [printable(f"alert: {state}: regressed against blessed baseline: {names}")]


def _write_junit(report: "RunReport", path: Path | None) -> int:
    """Write ``--junit`` for a published report; return 0, or 3 after printing why not."""
    if path is None:
        return 0
    from ..diagnostics import DiagnosticError
    from ..views.formats import RUN_REPORT_WRITERS, PublishedReport

    try:
        RUN_REPORT_WRITERS["junit"].write(PublishedReport(report), path, option="--junit")
    except DiagnosticError as exc:
        print_diagnostics(exc.diagnostics)
        return exc.exit_code
    return 0


def _print_outcome(report: "RunReport", report_path: Path | None, *, as_json: bool) -> None:
    from ..views.progress import render_summary, unmonitored_warning

    if as_json:
        unmonitored = unmonitored_warning(report)
        if unmonitored is not None:
            typer.echo(f"warning: {unmonitored}", err=True)
        sys.stdout.write(report.to_json())
        sys.stdout.flush()
        return
    page = report_path.with_name("report.html") if report_path is not None else None
    typer.echo(
        render_summary(
            report,
            report_path or Path("report.json"),
            color=use_color(sys.stdout),
            html=page if page is not None and page.is_file() else None,
        )
    )
    for line in _breach_lines(report):
        typer.echo(printable(line))


def _breach_lines(report: "RunReport") -> list[str]:
    """Summary lines for writes outside the sandbox: the project, the run directory."""
    lines = []
    if report.meta.project_modified:
        changed = report.meta.project_modified
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        lines.append(
            f"the project was modified during the run: {shown} "
            "(trials that would have used it were not run)"
        )
    if report.meta.tampered:
        names = ", ".join(t.path for t in report.meta.tampered[:5])
        lines.append(f"the run directory was tampered with: {names} moved aside")
    return lines


#: The signals that interrupt a run gracefully: Ctrl-C, ``kill``, and the terminal
#: closing (SIGHUP, whose default would end the engine at once and leave the hosts).
INTERRUPT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def _watch_signals(control: "RunControl", scope: "anyio.CancelScope") -> None:
    """First SIGINT/SIGTERM/SIGHUP: interrupt the run gracefully. Second: stop at once."""
    import contextlib

    import anyio

    from ..trial import kill_all_process_groups

    with anyio.open_signal_receiver(*INTERRUPT_SIGNALS) as signals:
        async for received in signals:
            if control.interrupted:
                kill_all_process_groups()
                os._exit(130)
            # After SIGHUP the terminal may be gone (writing to it fails): the run still ends.
            with contextlib.suppress(OSError):
                typer.echo(
                    "interrupting: stopping trials and publishing a partial report "
                    + (
                        "(the terminal closed)"
                        if received == signal.SIGHUP
                        else "(press Ctrl-C again to quit at once)"
                    ),
                    err=True,
                )
            control.interrupt()
