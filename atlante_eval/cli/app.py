"""The typer application and what every command shares.

Start-up stays fast: this module imports only typer and the standard library;
each command imports the library modules it needs when it runs.
"""

import contextlib
import errno
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args

import typer
from typer.core import TyperCommand

from .._util.memory import pause_collection, resume_collection
from .._util.terminal import safe_diagnostic, use_color
from .._version import __version__
from ..choices import GatewayMode, IsolationMode

if TYPE_CHECKING:
    from typer import _click as click  # the click typer bundles: types only

    from ..diagnostics import Diagnostic

__all__ = [
    "GATEWAY_METAVAR",
    "ISOLATION_METAVAR",
    "HelpCommand",
    "HostVersionOption",
    "OutOption",
    "PathArg",
    "app",
    "choice",
    "guarded",
    "main",
    "positive_int",
    "print_diagnostics",
    "print_json",
]


class HelpCommand(TyperCommand):
    """A command whose help names arguments by their metavar alone.

    Typer's plain help shows ``{BASE} {HEAD}`` in the usage line and a Python type
    after each argument (``REPORT... <list[Path]>``, ``kind <str>``); the usage
    line here reads ``BASE HEAD`` and the argument list ``REPORT...``.
    """

    def collect_usage_pieces(self, ctx: "click.Context") -> list[str]:
        """Return the usage line's pieces without braces around required arguments."""
        return [_BRACED.sub(r"\1", piece) for piece in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx: "click.Context", formatter: "click.HelpFormatter") -> None:
        """Write the Arguments and Options sections, arguments without a type."""
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                if param.nargs != 1 and not name.endswith("..."):
                    name += "..."
                arguments.append((name, record[1]))
            elif param.param_type_name == "option":
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


_BRACED = re.compile(r"\{([^{}]*)\}")
_F = TypeVar("_F", bound=Callable[..., Any])


class _App(typer.Typer):
    """A Typer app whose commands use :class:`HelpCommand` unless told otherwise."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[_F], _F]:
        """Register a command as :meth:`typer.Typer.command` does, with :class:`HelpCommand`."""
        kwargs.setdefault("cls", HelpCommand)
        register: Callable[[_F], _F] = super().command(*args, **kwargs)
        return register


app = _App(
    name="atlante-eval",
    help="Evaluate coding-agent harnesses built by Atlante, with deterministic checks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
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


#: ``--host-version`` on ``run``, ``validate`` and ``selftest`` (docs/hosts.md, Pinning).
HostVersionOption = Annotated[
    str | None,
    typer.Option(
        "--host-version",
        metavar="VERSION",
        help="Run the host at exactly this version (e.g. 2.1.332), installed into and run "
        "from the managed host cache; overrides eval.hostVersion. Default: eval.hostVersion, "
        "else the host on PATH.",
        show_default=False,
    ),
]


#: ``--isolation``'s metavar: the modes, as typer shows a choice. The value is checked
#: by the library (``run.isolate.isolation_mode``), so ``run`` and ``selftest``
#: refuse a bad one with the same diagnostic as the Python API.
ISOLATION_METAVAR = f"<{'|'.join(get_args(IsolationMode))}>"
#: ``--gateway``'s metavar, checked by the library (``run.options.gateway_mode``) likewise.
GATEWAY_METAVAR = f"<{'|'.join(get_args(GatewayMode))}>"


def positive_int(
    flag: str, raw: str | None, *, allow_zero: bool = False, maximum: int | None = None
) -> int | None:
    """Parse an integer option (``--jobs``, ``--retry-infra``) into a diagnostic on error."""
    from ..diagnostics import DiagnosticError, error

    if raw is None:
        return None
    text = raw.strip()
    value = int(text) if text.isascii() and text.isdigit() else -1
    low = 0 if allow_zero else 1
    if value < low or (maximum is not None and value > maximum):
        wanted = (
            f"{low}..{maximum}"
            if maximum is not None
            else f"a {'non-negative' if allow_zero else 'positive'} integer"
        )
        raise DiagnosticError([error("invalid-option", f"{flag} must be {wanted}, got {raw}")])
    return value


def choice(flag: str, raw: str | None, allowed: Sequence[str]) -> str | None:
    """Check an option's value against ``allowed``; a diagnostic in the option's terms."""
    from ..diagnostics import DiagnosticError, error

    if raw is None or raw in allowed:
        return raw
    raise DiagnosticError(
        [
            error(
                "invalid-option",
                f"{flag} must be one of: {', '.join(allowed)} (got {raw!r})",
                expected=", ".join(allowed),
            )
        ]
    )


def print_diagnostics(diagnostics: "Sequence[Diagnostic]") -> None:
    """Print diagnostics to stderr in the terminal format, separated by blank lines."""
    from ..diagnostics import format_diagnostic

    colored = use_color(sys.stderr)
    for diagnostic in diagnostics:
        typer.echo(format_diagnostic(safe_diagnostic(diagnostic), color=colored), err=True)
        typer.echo("", err=True)


def print_json(value: object) -> None:
    """Print ``value`` as 2-space JSON on stdout (undecodable path bytes as U+FFFD)."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    typer.echo(text.encode("utf-8", "replace").decode("utf-8"))


#: errno values meaning standard output cannot take what we print.
_OUTPUT_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})


def _output_failed(exc: OSError) -> int:
    """Report that standard output failed; silence it so exiting cannot fail again."""
    from ..diagnostics import error

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    reason = "the reader closed the pipe" if exc.errno == errno.EPIPE else exc.strerror or exc
    with contextlib.suppress(OSError):
        print_diagnostics(
            [
                error(
                    "output-failed",
                    f"could not write to standard output: {reason}",
                    cause=str(exc),
                    next="send the output to a reader that takes all of it, or to a file "
                    "with free space (a run's report was published before)",
                )
            ]
        )
    return 3


def guarded(action: Callable[[], int], *, collect: bool = True) -> int:
    """Run ``action``; turn diagnostics and unexpected errors into output and an exit code.

    The garbage collector, held while the CLI starts (:func:`main`), runs again
    before ``action``; with ``collect=False`` the action turns it back on itself
    (``run``: when its first trial starts).
    """
    from ..diagnostics import DiagnosticError, error

    if collect:
        resume_collection()
    try:
        status = action()
        sys.stdout.flush()  # surface a full or closed stdout here, not at interpreter exit
        return status
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            return _unexpected(exc)
        return _output_failed(exc)
    except DiagnosticError as exc:
        print_diagnostics(exc.diagnostics)
        return exc.exit_code
    except KeyboardInterrupt:
        print_diagnostics(
            [error("eval-run-interrupted", "interrupted", next="run the command again")]
        )
        return 3
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> int:
    from ..diagnostics import error

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
    """Entry point of the ``atlante-eval`` console script.

    Usage errors (an unknown option or command, a missing value) are printed as
    ``invalid-option`` diagnostics with the closest real option (:mod:`.usage`).
    """
    from .._util.plugins import skip_pydantic_plugins
    from .usage import run_app

    pause_collection()  # start-up makes no garbage worth a collection (_util/memory.py)
    skip_pydantic_plugins()
    sys.exit(run_app(app, print_diagnostics))
