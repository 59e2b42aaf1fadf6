"""The typer application and what every command shares.

Start-up stays fast: this module imports only typer and the standard library;
each command imports the library modules it needs when it runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._version import __version__
from ..terminal import use_color

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic

__all__ = [
    "OutOption",
    "PathArg",
    "app",
    "guarded",
    "main",
    "positive_int",
    "print_diagnostics",
    "print_json",
]

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
        metavar="PATH",
        help="Project directory, or its atlante.jsonc / atlante.json (default: current directory).",
        show_default=False,
    ),
]


OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        metavar="DIR",
        help="Report base directory (default <project>/.atlante/eval).",
        show_default=False,
    ),
]


def positive_int(flag: str, raw: str | None, *, allow_zero: bool = False) -> int | None:
    """Parse an integer option (``--jobs``, ``--retry-infra``) into a diagnostic on error."""
    from ..diagnostics import DiagnosticError, error

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


def print_diagnostics(diagnostics: Sequence[Diagnostic]) -> None:
    """Print diagnostics to stderr in the terminal format, separated by blank lines."""
    from ..diagnostics import format_diagnostic

    colored = use_color(sys.stderr)
    for diagnostic in diagnostics:
        typer.echo(format_diagnostic(diagnostic, color=colored), err=True)
        typer.echo("", err=True)


def print_json(value: object) -> None:
    """Print ``value`` as 2-space JSON on stdout."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def guarded(action: Callable[[], int]) -> int:
    """Run ``action``; turn diagnostics and unexpected errors into output and an exit code."""
    from ..diagnostics import DiagnosticError, error

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


def main() -> None:
    """Entry point of the ``atlante-eval`` console script."""
    app()
