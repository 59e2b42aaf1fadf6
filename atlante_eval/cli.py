"""The ``atlante-eval`` command line: thin wiring over the Python API.

Each command parses its options, calls the library, renders the result and
returns an exit code decided by :mod:`atlante_eval.diagnostics` or the report.
No traceback ever reaches the user: problems become diagnostics on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Literal

import typer

from ._version import __version__
from .diagnostics import Diagnostic, DiagnosticError, error, format_diagnostic
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
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version."),
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
) -> None:
    """Run every gate the run command runs before a trial, and report the result.

    Exits 0 when the project, its scenarios, pack suites and native outputs are
    valid, 2 otherwise.
    """

    def action() -> int:
        try:
            suite = load_suite(path)
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
                    )
                ]
            )
        _print_json(json_schema(kind))
        return 0

    raise typer.Exit(guarded(action))


def _diagnostic_json(diagnostic: Diagnostic) -> dict[str, object]:
    return diagnostic.model_dump(mode="json", exclude_none=True)


def _print_json(value: object) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def main() -> None:
    """Entry point of the ``atlante-eval`` console script."""
    app()
