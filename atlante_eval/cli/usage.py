"""Command-line usage errors in the tool's own diagnostic style.

Click (vendored by recent typer releases) reports an unknown option, a missing
value or an unknown command as ``Usage: ... Error: No such option: --jbos
(Possible options: --jobs, --json)``; every other problem of an option is an
``invalid-option`` diagnostic. :func:`run_app` turns the first kind into the
second too, with the closest real option as the next step (``did you mean
--jobs?``), exit status 2 as before.

Click's exception classes live in a private module of typer (``typer._click``)
or in ``click``, depending on the typer release, so they are recognised by what
they carry (``exit_code``, ``format_message``, ``ctx``, ``option_name``), not by
import.
"""

import difflib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic

__all__ = ["closest", "run_app", "usage_diagnostic"]

#: How alike a name must be to a real one to be suggested (difflib's ratio).
_CUTOFF = 0.5
#: The exit status click gives a usage error.
_USAGE_EXIT = 2


def closest(wanted: str, names: Sequence[str]) -> str | None:
    """The name of ``names`` most like ``wanted``, when one is alike enough."""
    found = difflib.get_close_matches(wanted, list(dict.fromkeys(names)), n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def _options(ctx: Any) -> list[str]:
    params = getattr(getattr(ctx, "command", None), "params", None) or []
    return [
        name
        for param in params
        for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
        if name.startswith("-")
    ]


def _help(ctx: Any, argv: Sequence[str] = ()) -> str:
    """```atlante-eval run -h```: the help of the command at fault (click may not say which)."""
    path = getattr(ctx, "command_path", None)
    if not path:
        first = next(iter(argv), "")
        path = f"atlante-eval {first}" if first and not first.startswith("-") else "atlante-eval"
    return f"`{path} -h`"


def _unknown_command(ctx: Any, argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """The word of ``argv`` a command group ``ctx`` does not know, and the ones it does."""
    commands = getattr(getattr(ctx, "command", None), "commands", None)
    if not isinstance(commands, dict) or not commands:
        return None
    depth = len(str(getattr(ctx, "command_path", "")).split()) - 1
    words = [word for word in argv[depth:] if not word.startswith("-")]
    if not words or words[0] in commands:
        return None
    return words[0], sorted(commands)


def usage_diagnostic(exc: Exception, argv: Sequence[str] = ()) -> "Diagnostic":
    """The ``invalid-option`` diagnostic saying what click's usage error ``exc`` says.

    ``argv`` (the command line after the program name) names an unknown command.
    """
    from ..diagnostics import error  # only on an error: ``--help`` never loads pydantic

    ctx = getattr(exc, "ctx", None)
    option = getattr(exc, "option_name", None)
    unknown = _unknown_command(ctx, argv)
    if unknown is not None:
        word, known = unknown
        guess = closest(word, known)
        path = getattr(ctx, "command_path", None) or "atlante-eval"
        hint = f"did you mean `{path} {guess}`? " if guess else ""
        return error(
            "invalid-option",
            f"unknown command {word!r}",
            expected=f"one of {', '.join(known)}",
            next=f"{hint}{_help(ctx)} lists the commands",
        )
    if isinstance(option, str) and hasattr(exc, "possibilities"):  # click's NoSuchOption
        possible = list(getattr(exc, "possibilities", None) or [])
        guess = closest(option, _options(ctx)) or next(iter(possible), None)
        hint = f"did you mean {guess}? " if guess else ""
        return error(
            "invalid-option",
            f"unknown option {option}",
            next=f"{hint}{_help(ctx)} lists the options",
        )
    format_message: Callable[[], str] = exc.format_message  # type: ignore[attr-defined]
    message = format_message().strip().rstrip(".")
    return error(
        "invalid-option",
        message[:1].lower() + message[1:],
        next=f"{_help(ctx, argv)} shows how to use it",
    )


def _is_usage_error(exc: Exception) -> bool:
    """Click's UsageError (and subclasses), but not the help shown for no arguments."""
    return (
        getattr(exc, "exit_code", None) == _USAGE_EXIT
        and callable(getattr(exc, "format_message", None))
        and hasattr(exc, "ctx")
        and type(exc).__name__ != "NoArgsIsHelpError"
    )


def run_app(app: typer.Typer, print_diagnostics: "Callable[[list[Diagnostic]], None]") -> int:
    """Run ``app`` as the console script does; return its exit status.

    A usage error is printed with ``print_diagnostics``; any other error click
    reports (a missing file, the help for no arguments) is shown as click shows it.
    """
    try:
        status = app(standalone_mode=False)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        return 1
    except Exception as exc:
        if _is_usage_error(exc):
            print_diagnostics([usage_diagnostic(exc, sys.argv[1:])])
            return _USAGE_EXIT
        show = getattr(exc, "show", None)
        code = getattr(exc, "exit_code", None)
        if not callable(show) or not isinstance(code, int):
            raise
        show(file=sys.stderr)
        return code
    return status if isinstance(status, int) else 0
