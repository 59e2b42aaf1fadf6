"""Check the output paths a command was given before it spends anything.

``run --junit FILE`` used to be checked only when the report was written, after
every host session had been paid for. :func:`check_output_paths` looks at every
output path of a command (``--junit``, ``--out``, ``--markdown``, ``--output``,
and any later one such as ``--html``) up front, and reports every problem at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..diagnostics import Diagnostic, DiagnosticError, error
from .publish import PublishError, check_output_target

__all__ = ["check_output_paths", "output_path_problem"]


def _nearest_existing(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def output_path_problem(path: Path, *, directory: bool = False) -> str | None:
    """Why ``path`` cannot be written, or ``None`` when it can (as far as can be told now).

    A file needs an existing, writable parent directory and must not be a directory
    itself. A ``directory`` (a report base) is created with its parents, so it needs
    a writable existing ancestor and must not be a file.
    """
    absolute = Path(os.path.abspath(path))  # noqa: PTH100 - as given: resolve() would follow symlinks
    if directory:
        if absolute.exists() and not absolute.is_dir():
            return f"{path} exists and is not a directory"
        ancestor = _nearest_existing(absolute)
        if not ancestor.is_dir():
            return f"{ancestor} is not a directory"
        if not os.access(ancestor, os.W_OK | os.X_OK):
            return f"{ancestor} is not writable"
        return None
    if absolute.is_dir():
        return f"{path} is a directory"
    try:
        check_output_target(absolute)
    except PublishError as exc:  # a FIFO, a device, a symlink: never replaced by a file
        return str(exc)
    parent = absolute.parent
    if not parent.exists():
        return f"its directory {parent} does not exist"
    if not parent.is_dir():
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"its directory {parent} is not writable"
    return None


def check_output_paths(
    files: Mapping[str, Path | None], directories: Mapping[str, Path | None] | None = None
) -> None:
    """Refuse, before any work, output paths that cannot be written.

    Args:
        files: option name (``"--junit"``) -> the file it names (``None``: not given;
            ``-`` means standard output and is always fine).
        directories: option name (``"--out"``) -> the directory it names.

    Raises:
        DiagnosticError: ``invalid-output-path`` (exit 2) for a file option;
            ``eval-report-failed`` (exit 3, as the reference has it) for a report
            directory that cannot be created.
    """
    problems: list[Diagnostic] = []
    for flag, path in files.items():
        if path is None or str(path) == "-":
            continue
        problem = output_path_problem(path)
        if problem is not None:
            problems.append(
                error(
                    "invalid-output-path",
                    f"{flag} {path} cannot be written: {problem}",
                    next=f"create the directory first, or pass {flag} a path in a writable "
                    "directory; nothing was run",
                )
            )
    for flag, path in (directories or {}).items():
        if path is None:
            continue
        problem = output_path_problem(path, directory=True)
        if problem is not None:
            problems.append(
                error(
                    "eval-report-failed",
                    f"{flag} {path} cannot hold reports: {problem}",
                    source=str(path),
                    next=f"pass {flag} a directory (it is created if missing); nothing was run",
                )
            )
    if problems:
        raise DiagnosticError(problems)
