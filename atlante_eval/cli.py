"""The ``atlante-eval`` command line: thin wiring over the Python API.

Each command parses its options, calls the library, renders the result and
returns an exit code decided by :mod:`atlante_eval.diagnostics` or the report.
No traceback ever reaches the user: problems become diagnostics on stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Literal

import anyio
import typer

from ._version import __version__
from .diagnostics import Diagnostic, DiagnosticError, error, format_diagnostic
from .hosts import create_host
from .junit import write_junit
from .logs import LogFormat, configure_logging
from .options import RunOptions, run_options
from .process import kill_all_process_groups
from .progress import ProgressPrinter, render_summary
from .report import RunReport
from .runner import EvalRunError, RunControl, RunOutcome, execute_run
from .schemas import SCHEMA_KINDS, json_schema
from .suite import load_suite

app = typer.Typer(
    name="atlante-eval",
    help="Evaluate coding-agent harnesses built by Atlante, with deterministic checks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)

PathArg = Annotated[
    Path | None,
    typer.Argument(
        help="Project directory, or its atlante.jsonc / atlante.json (default: current directory).",
        show_default=False,
    ),
]


def _color(stream: object) -> bool:
    """Whether to colour output on ``stream``: a TTY and ``NO_COLOR`` unset or empty."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def print_diagnostics(diagnostics: Sequence[Diagnostic]) -> None:
    """Print diagnostics to stderr in the terminal format, separated by blank lines."""
    color = _color(sys.stderr)
    for diagnostic in diagnostics:
        typer.echo(format_diagnostic(diagnostic, color=color), err=True)
        typer.echo("", err=True)


def guarded(action: Callable[[], int]) -> int:
    """Run ``action``; turn diagnostics and unexpected errors into output and an exit code."""
    try:
        return action()
    except DiagnosticError as exc:
        print_diagnostics(exc.diagnostics)
        return exc.exit_code
    except KeyboardInterrupt:
        print_diagnostics(
            [error("eval-run-interrupted", "interrupted", next="run the command again")]
        )
        return 3
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        print_diagnostics(
            [
                error(
                    "eval-run-failed",
                    "unexpected internal error",
                    cause=f"{type(exc).__name__}: {exc}",
                    next="report this at the atlante-eval issue tracker with the command you ran",
                )
            ]
        )
        return 3


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"atlante-eval {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Evaluate coding-agent harnesses built by Atlante."""


@app.command()
def validate(
    path: PathArg = None,
    output_format: Annotated[
        Literal["text", "json"],
        typer.Option("--format", help="Output format for the result and diagnostics."),
    ] = "text",
    probe: Annotated[
        bool,
        typer.Option("--probe", help="Also probe the host: its version and stored credentials."),
    ] = False,
) -> None:
    """Run every gate the run command runs before a trial, and report the result.

    Exits 0 when the project, its scenarios, pack suites and native outputs are
    valid, 2 otherwise; with ``--probe``, 3 when the host cannot run.
    """

    def action() -> int:
        host_version: str | None = None
        try:
            suite = load_suite(path)
            if probe:
                host = create_host(suite.project.eval.host)
                anyio.run(host.probe)
                host_version = host.version or "unknown"
        except DiagnosticError as exc:
            if output_format == "json":
                _print_json(
                    {"ok": False, "diagnostics": [_diagnostic_json(d) for d in exc.diagnostics]}
                )
                return exc.exit_code
            raise
        if output_format == "json":
            _print_json(
                {
                    "ok": True,
                    "host": suite.project.eval.host,
                    "scenarios": [s.name for s in suite.scenarios],
                    "diagnostics": [_diagnostic_json(d) for d in suite.warnings],
                    **({"hostVersion": host_version} if probe else {}),
                }
            )
            return 0
        print_diagnostics(suite.warnings)
        count = len(suite.scenarios)
        files = len(suite.native.files) if suite.native else 0
        typer.echo(
            f"ok: {count} scenario{'s' if count != 1 else ''} valid for "
            f"{suite.project.eval.host}; {files} native output file{'s' if files != 1 else ''} "
            "verified"
        )
        if probe:
            typer.echo(
                f"ok: host {suite.project.eval.host} {host_version} is installed and signed in"
            )
        return 0

    raise typer.Exit(guarded(action))


@app.command(name="list")
def list_scenarios(
    path: PathArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the discovered scenarios: name, source, origin, agent and checks."""

    def action() -> int:
        suite = load_suite(path, verify_native=False)
        included = {s.name for s in suite.scenarios}
        rows = [
            {
                "name": s.name,
                "source": s.source,
                "origin": s.origin.label,
                "agent": s.document.task.agent,
                "checks": [c.type for c in s.document.checks],
                "included": s.name in included,
                "description": s.document.description,
            }
            for s in suite.discovered
        ]
        if as_json:
            _print_json(rows)
            return 0
        print_diagnostics(suite.warnings)
        if not rows:
            typer.echo("no scenarios")
            return 0
        header = ("NAME", "SOURCE", "ORIGIN", "AGENT", "CHECKS")
        table = [header] + [
            (
                str(r["name"]) + ("" if r["included"] else " (not included)"),
                str(r["source"]),
                str(r["origin"]),
                str(r["agent"] or "-"),
                ", ".join(r["checks"]),  # type: ignore[arg-type]
            )
            for r in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
        for row in table:
            cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
            typer.echo("  ".join([*cells, row[-1]]))
        return 0

    raise typer.Exit(guarded(action))


@app.command()
def schema(
    kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(SCHEMA_KINDS)}.")],
) -> None:
    """Print the JSON Schema of a file format (scenario, config or report)."""

    def action() -> int:
        if kind not in SCHEMA_KINDS:
            raise DiagnosticError(
                [
                    error(
                        "invalid-option",
                        f"unknown schema {kind!r}",
                        expected=", ".join(SCHEMA_KINDS),
                        next="run `atlante-eval schema scenario` (or config, report)",
                    )
                ]
            )
        _print_json(json_schema(kind))
        return 0

    raise typer.Exit(guarded(action))


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
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Report base directory (default <project>/.atlante/eval).",
            show_default=False,
        ),
    ] = None,
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
    last_failed: Annotated[
        bool,
        typer.Option("--last-failed", help="Run only scenarios that did not fully pass last time."),
    ] = False,
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
) -> None:
    """Run every selected scenario's trials on the configured host and publish the report.

    Exit status: 0 every trial passed; 1 a trial failed, timed out, exceeded its
    budget, hit an infra-error or was skipped; 2 validation failed; 3 the run could
    not start or finish (host unavailable, interrupted, report not written).
    """
    configure_logging(log_format)

    def action() -> int:
        options = run_options(
            scenarios=scenario,
            trials=trials,
            jobs=_positive_int("--jobs", jobs),
            out=out,
            keep=keep,
            pass_env=pass_env,
            retry_infra=_positive_int("--retry-infra", retry_infra, allow_zero=True) or 0,
            resume=resume,
            shard=shard,
            last_failed=last_failed,
        )
        return anyio.run(_run_async, path, options, as_json, junit)

    raise typer.Exit(guarded(action))


def _positive_int(flag: str, raw: str | None, *, allow_zero: bool = False) -> int | None:
    if raw is None:
        return None
    text = raw.strip()
    value = int(text) if text.isascii() and text.isdigit() else -1
    if value < (0 if allow_zero else 1):
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"{flag} must be a {'non-negative' if allow_zero else 'positive'} integer, "
                    f"got {raw}",
                )
            ]
        )
    return value


async def _run_async(
    path: Path | None, options: RunOptions, as_json: bool, junit: Path | None = None
) -> int:
    control = RunControl()
    printer = ProgressPrinter(sys.stderr)
    outcome: RunOutcome | None = None
    failure: EvalRunError | None = None
    refused: DiagnosticError | None = None
    with printer:
        async with anyio.create_task_group() as group:
            group.start_soon(_watch_signals, control, group.cancel_scope)
            try:
                outcome = await execute_run(path, options, on_event=printer, control=control)
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
    return _write_junit(outcome.report, junit) or outcome.report.exit_code()


def _write_junit(report: RunReport, path: Path | None) -> int:
    """Write ``--junit`` for a published report; return 0, or 3 after printing why not."""
    if path is None:
        return 0
    try:
        write_junit(report, path)
    except DiagnosticError as exc:
        print_diagnostics(exc.diagnostics)
        return exc.exit_code
    return 0


def _print_outcome(report: RunReport, report_path: Path | None, *, as_json: bool) -> None:
    if as_json:
        if any(t.budget_unmonitored for t in report.all_trials()):
            typer.echo(
                "warning: token budget unmonitored for one or more trials "
                "(no usage events were observed)",
                err=True,
            )
        sys.stdout.write(report.to_json())
        sys.stdout.flush()
        return
    typer.echo(render_summary(report, report_path or Path("report.json"), color=_color(sys.stdout)))


async def _watch_signals(control: RunControl, scope: anyio.CancelScope) -> None:
    """First SIGINT/SIGTERM: interrupt the run gracefully. Second: stop at once."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            if control.interrupted:
                kill_all_process_groups()
                os._exit(130)
            typer.echo(
                "interrupting: stopping trials and publishing a partial report "
                "(press Ctrl-C again to quit at once)",
                err=True,
            )
            control.interrupt()


def _diagnostic_json(diagnostic: Diagnostic) -> dict[str, object]:
    return diagnostic.model_dump(mode="json", exclude_none=True)


def _print_json(value: object) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def main() -> None:
    """Entry point of the ``atlante-eval`` console script."""
    app()


# compare, junit, merge (cli_reports) and selftest (cli_selftest) register on ``app``.
from . import cli_reports, cli_selftest  # noqa: E402,F401 - imported after app, for effect
