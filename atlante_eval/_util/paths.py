"""Path rules shared by validation, sandboxes and checks.

A *sandbox-relative path* (fixture, check path, allowlist entry) is a relative,
``/``-separated path with no ``..``, ``.git`` or ``node_modules`` segment. At run
time, :func:`resolve_no_follow` re-checks containment and refuses any symbolic
link along the way, so a symlink planted by an agent or a setup command cannot
redirect a check or a copy outside the sandbox.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path
from typing import Literal

__all__ = [
    "FORBIDDEN_SEGMENTS",
    "UnsafePathError",
    "UnsafeReason",
    "display_path",
    "resolve_no_follow",
    "sandbox_path_problem",
    "split_segments",
]

#: Directory names that may never appear in a fixture or a sandbox-relative path.
FORBIDDEN_SEGMENTS = frozenset({".git", "node_modules"})

_SEPARATORS = re.compile(r"[/\\]")
_DRIVE = re.compile(r"^[A-Za-z]:([/\\]|$)")


#: Why a path is unsafe: it leaves its root, crosses a symbolic link, its root is not a
#: real directory, or a component could not be inspected.
UnsafeReason = Literal["outside", "symlink", "bad-root", "uninspectable"]


class UnsafePathError(Exception):
    """Raised by :func:`resolve_no_follow` when a path escapes its root or meets a symlink.

    Callers branch on :attr:`reason`, never on the message text.
    """

    def __init__(self, message: str, *, reason: UnsafeReason) -> None:
        super().__init__(message)
        self.reason: UnsafeReason = reason


def split_segments(value: str) -> list[str]:
    """Split a relative path on ``/`` or ``\\``, dropping empty and ``.`` segments."""
    return [part for part in _SEPARATORS.split(value) if part not in ("", ".")]


def sandbox_path_problem(value: str) -> str | None:
    """Return why ``value`` is not a safe sandbox-relative path, or ``None`` if it is."""
    if not value:
        return "must not be empty"
    if "\0" in value:
        return "must not contain a NUL character"
    if value[0] in "/\\" or _DRIVE.match(value):
        return "must be relative, not absolute"
    if value[-1] in "/\\":
        return "must not end with a path separator"
    segments = _SEPARATORS.split(value)
    if ".." in segments:
        return "must not contain '..' segments"
    forbidden = FORBIDDEN_SEGMENTS.intersection(segments)
    if forbidden:
        return f"must not contain a {sorted(forbidden)[0]} segment"
    return None


def resolve_no_follow(root: Path, relative: str) -> Path:
    """Return ``root / relative`` after proving no existing component is a symlink.

    The root itself must be a real directory. Components that do not exist yet are
    fine (the result may not exist).

    Raises:
        UnsafePathError: the path is absolute, climbs with ``..``, or a component
            (including the last) is a symbolic link or cannot be inspected.
    """
    if not relative or relative[0] in "/\\" or _DRIVE.match(relative):
        raise UnsafePathError("check path must resolve inside the sandbox", reason="outside")
    parts = split_segments(relative)
    if ".." in parts or not parts:
        raise UnsafePathError("check path must resolve inside the sandbox", reason="outside")
    try:
        root_info = os.lstat(root)
    except OSError as exc:
        raise UnsafePathError(
            f"could not inspect sandbox path: {exc.strerror}", reason="uninspectable"
        ) from exc
    if stat.S_ISLNK(root_info.st_mode) or not stat.S_ISDIR(root_info.st_mode):
        raise UnsafePathError("sandbox root is not a real directory", reason="bad-root")
    current = root
    for index, part in enumerate(parts):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return root.joinpath(*parts)
        except NotADirectoryError:
            return root.joinpath(*parts)
        except OSError as exc:
            raise UnsafePathError(
                f"could not inspect sandbox path: {exc.strerror}", reason="uninspectable"
            ) from exc
        if stat.S_ISLNK(info.st_mode):
            shown = "/".join(parts[: index + 1])
            raise UnsafePathError(f"path traverses a symbolic link at {shown}", reason="symlink")
        if index < len(parts) - 1 and not stat.S_ISDIR(info.st_mode):
            return root.joinpath(*parts)
    return current


def display_path(path: Path | str, root: Path | None = None) -> str:
    """``path`` as text for a user: relative to ``root`` when inside it, bytes that are not
    UTF-8 shown as ``\\xNN``.
    """
    text = os.fspath(path)
    if root is not None:
        with contextlib.suppress(ValueError):
            text = Path(text).absolute().relative_to(root.absolute()).as_posix()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", errors="backslashreplace")
    return text
