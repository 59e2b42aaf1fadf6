"""Generic mutants: cheats every scenario must catch when its checks claim to.

Selftest derives them from the checks, applies each after the reference solution
(after nothing, for a no-change scenario) in a fresh sandbox, and requires at
least one check to fail:

* ``stray-file``: a file outside every ``diff-allowlist``'s ``allow`` (one per
  scenario that has a ``diff-allowlist``);
* ``edit-unchanged``: each ``file-unchanged`` path edited (created when missing;
  a file added inside it when it is a directory);
* ``delete-exists``: each ``file-exists`` path deleted.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .._util.paths import resolve_no_follow
from ..project import AnyCheck, DiffAllowlistCheck, FileExistsCheck, FileUnchangedCheck
from ..trial import remove_tree

__all__ = ["STRAY_FILE", "Mutant", "MutantKind", "apply_mutant", "generic_mutants"]

MutantKind = Literal["stray-file", "edit-unchanged", "delete-exists"]
#: Name of the stray file (a numeric suffix is added when a check allows it).
STRAY_FILE = "atlante-selftest-stray.txt"
_EDIT = "\natlante-eval selftest mutant: this line was not here before\n"


@dataclass(frozen=True, slots=True)
class Mutant:
    """One generic cheat: what it does, to which path, derived from which check."""

    kind: MutantKind
    """What the mutant does."""
    path: str
    """The sandbox-relative path it writes, edits or deletes."""
    check: int
    """Index of the check that claims to catch it."""

    @property
    def label(self) -> str:
        """``<kind> <path>``, as findings and the table name it."""
        return f"{self.kind} {self.path}"


def _stray_path(allowed: set[str]) -> str:
    stem, dot, suffix = STRAY_FILE.rpartition(".")
    candidate, number = STRAY_FILE, 1
    while candidate in allowed:
        number += 1
        candidate = f"{stem}-{number}{dot}{suffix}"
    return candidate


def generic_mutants(checks: list[AnyCheck]) -> list[Mutant]:
    """The mutants the scenario's checks claim to catch, in check order (paths deduplicated)."""
    mutants: list[Mutant] = []
    allowlists = [(i, c) for i, c in enumerate(checks) if isinstance(c, DiffAllowlistCheck)]
    if allowlists:
        allowed = {path for _, check in allowlists for path in check.allow}
        mutants.append(Mutant("stray-file", _stray_path(allowed), allowlists[0][0]))
    seen: set[tuple[str, str]] = set()
    for index, check in enumerate(checks):
        kind: MutantKind
        if isinstance(check, FileUnchangedCheck):
            kind = "edit-unchanged"
        elif isinstance(check, FileExistsCheck):
            kind = "delete-exists"
        else:
            continue
        if (kind, check.path) not in seen:
            seen.add((kind, check.path))
            mutants.append(Mutant(kind, check.path, index))
    return mutants


def _parents(sandbox: Path, relative: str) -> None:
    current = sandbox
    for part in relative.split("/")[:-1]:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            current.mkdir()
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise OSError(f"cannot write {relative}: a parent is not a real directory")


def _append(target: Path) -> None:
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(target, flags, 0o644)
    try:
        os.write(fd, _EDIT.encode("utf-8"))
    finally:
        os.close(fd)


def apply_mutant(mutant: Mutant, sandbox: Path) -> str:
    """Perform ``mutant`` in ``sandbox``; return what it did.

    Raises:
        OSError: the mutant cannot be applied (a path crosses a symbolic link, a
            ``file-exists`` path is already missing, ...).
    """
    target = resolve_no_follow(sandbox, mutant.path)
    if mutant.kind == "delete-exists":
        info = os.lstat(target)
        if stat.S_ISDIR(info.st_mode):
            remove_tree(target)
        else:
            os.unlink(target)
        return f"deleted {mutant.path}"
    _parents(sandbox, mutant.path)
    if mutant.kind == "stray-file":
        _append(target)
        return f"wrote {mutant.path}"
    try:
        is_dir = stat.S_ISDIR(os.lstat(target).st_mode)
    except FileNotFoundError:
        is_dir = False
    if is_dir:
        inner = resolve_no_follow(sandbox, f"{mutant.path}/{STRAY_FILE}")
        _append(inner)
        return f"added {mutant.path}/{STRAY_FILE}"
    _append(target)
    return f"edited {mutant.path}"
