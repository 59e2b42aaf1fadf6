"""Reference solutions: where they live, what they may contain, and how they are applied.

A reference solution is a known-good answer to one scenario, used by ``atlante-eval
selftest`` to prove the scenario's checks *can* pass. It needs no key in the
scenario document; it is found by name::

    <directory of the scenario document>/solutions/<scenario name>/
        files/        a tree copied over the sandbox root (optional)
        delete.json   a JSON array of sandbox-relative paths to delete (optional)
        transcript.jsonl  the transcript entries the solution implies (optional)
        no-change     an empty file: the right outcome is no change (optional)
        counter/<label>/  counter-solutions: known cheats or mistakes (optional),
                      each with files/, delete.json and transcript.jsonl as above

A ``transcript.jsonl`` holds one transcript entry (docs/transcripts.md) per line,
the header optional; selftest writes them as the trial's transcript, so behaviour
checks are proven too. A ``no-change`` scenario takes the null agent as its
reference and needs counter-solutions instead of files.

``--solutions DIR`` replaces ``<directory of the scenario document>/solutions``
with ``DIR`` for every scenario. Deletions run first, then the overlay. Nothing
else may sit in a solution directory; ``files/`` must hold only regular files and
directories (no symbolic links, no ``.git`` or ``node_modules``), and every path
must be a safe sandbox-relative path. When a solution is applied, every target is
re-checked with :func:`atlante_eval._util.paths.resolve_no_follow`, so a symbolic link
planted by a setup command cannot redirect a write or a deletion outside the
sandbox. :func:`find_solutions` looks up and validates the solution of every
selected scenario at once, for a selftest.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._util.jsondoc import DocumentParseError, DocumentReadError, parse_document, read_document
from .._util.paths import (
    FORBIDDEN_SEGMENTS,
    UnsafePathError,
    display_path,
    resolve_no_follow,
    sandbox_path_problem,
)
from ..diagnostics import Diagnostic, error, warning
from ..project import SCENARIO_NAME_PATTERN, Scenario, Suite
from ..transcript import HeaderEntry, RawEntry, TranscriptEntry, parse_entry
from ..trial import remove_tree

__all__ = [
    "SOLUTIONS_DIRNAME",
    "SOLUTION_COUNTERS",
    "SOLUTION_DELETE",
    "SOLUTION_FILES",
    "SOLUTION_NO_CHANGE",
    "SOLUTION_TRANSCRIPT",
    "Solution",
    "SolutionError",
    "SolutionSearch",
    "apply_solution",
    "find_solutions",
    "load_solution",
    "solution_bases",
    "solution_directory",
    "unknown_solution_warnings",
]

#: Name of the directory beside the scenario documents that holds their solutions.
SOLUTIONS_DIRNAME = "solutions"
#: Sub-directory of a solution whose tree is copied over the sandbox root.
SOLUTION_FILES = "files"
#: File of a solution listing sandbox-relative paths to delete.
SOLUTION_DELETE = "delete.json"
#: File of a solution holding the transcript entries it implies.
SOLUTION_TRANSCRIPT = "transcript.jsonl"
#: Empty file declaring that the scenario's right outcome is no change.
SOLUTION_NO_CHANGE = "no-change"
#: Directory of a solution holding its counter-solutions, one per label.
SOLUTION_COUNTERS = "counter"
#: Largest ``transcript.jsonl`` a solution may carry.
_MAX_TRANSCRIPT_BYTES = 1024 * 1024
_LABEL = re.compile(SCENARIO_NAME_PATTERN)

_MAX_DEPTH = 32
_CHUNK = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO in the way must not block the write


class SolutionError(Exception):
    """Raised by :func:`load_solution` and :func:`apply_solution` for a bad or unsafe solution.

    ``selftest`` reports it as ``selftest-solution-invalid``.
    """


@dataclass(frozen=True, slots=True)
class Solution:
    """A validated reference solution for one scenario."""

    scenario: str
    """Name of the scenario it solves."""
    directory: Path
    """The solution directory."""
    label: str
    """The directory as shown to users (project-relative when possible)."""
    files: tuple[str, ...]
    """Sandbox-relative paths of the files to copy, sorted."""
    delete: tuple[str, ...]
    """Sandbox-relative paths to delete, in the order listed."""
    transcript: tuple[TranscriptEntry, ...] | None = None
    """The transcript entries the solution implies (``None``: it carries none)."""
    no_change: bool = False
    """The scenario's right outcome is no change: the null agent is its reference."""
    counters: tuple[Solution, ...] = ()
    """Counter-solutions (known cheats or mistakes), sorted by label."""
    counter_label: str | None = None
    """The label of a counter-solution (``None`` for the reference solution)."""


def solution_directory(scenario: Scenario, solutions: Path | None = None) -> Path:
    """Return where the solution of ``scenario`` lives (it may not exist).

    Args:
        scenario: the scenario.
        solutions: ``--solutions DIR``; default ``<scenario document dir>/solutions``.
    """
    base = solutions if solutions is not None else scenario.path.parent / SOLUTIONS_DIRNAME
    return base / scenario.name


def _walk_files(directory: Path) -> list[str]:
    """Return the regular files under ``directory`` as sorted relative paths."""
    found: list[str] = []
    stack: list[tuple[Path, str, int]] = [(directory, "", 0)]
    while stack:
        current, prefix, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise SolutionError(f"{SOLUTION_FILES}/ is nested deeper than {_MAX_DEPTH} levels")
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as exc:
            raise SolutionError(f"cannot read {SOLUTION_FILES}/{prefix}: {exc.strerror}") from exc
        for entry in entries:
            relative = f"{prefix}{entry.name}"
            shown = f"{SOLUTION_FILES}/{relative}"
            if entry.name in FORBIDDEN_SEGMENTS:
                raise SolutionError(f"{shown} is a forbidden entry ({entry.name})")
            if entry.is_symlink():
                raise SolutionError(f"{shown} is a symbolic link")
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), f"{relative}/", depth + 1))
            elif entry.is_file(follow_symlinks=False):
                problem = sandbox_path_problem(relative)
                if problem:
                    raise SolutionError(f"{shown}: path {problem}")
                found.append(relative)
            else:
                raise SolutionError(f"{shown} is not a regular file or directory")
    return sorted(found)


def _read_delete_list(path: Path) -> tuple[str, ...]:
    try:
        text = read_document(path)
    except DocumentReadError as exc:
        raise SolutionError(f"{SOLUTION_DELETE} {exc}") from exc
    try:
        value = parse_document(text, jsonc=False)
    except DocumentParseError as exc:
        raise SolutionError(
            f"{SOLUTION_DELETE} is malformed JSON ({exc.message} at line {exc.line}, "
            f"column {exc.column})"
        ) from exc
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SolutionError(f"{SOLUTION_DELETE} must be a JSON array of path strings")
    seen: set[str] = set()
    for item in value:
        problem = sandbox_path_problem(item)
        if problem:
            raise SolutionError(f"{SOLUTION_DELETE}: path {item!r} {problem}")
        if item in seen:
            raise SolutionError(f"{SOLUTION_DELETE} lists {item!r} twice")
        seen.add(item)
    return tuple(value)


def _read_transcript(path: Path) -> tuple[TranscriptEntry, ...]:
    """Read a solution's ``transcript.jsonl``: one entry per line, an optional header first."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise SolutionError(f"{SOLUTION_TRANSCRIPT} is not a regular file")
        if info.st_size > _MAX_TRANSCRIPT_BYTES:
            raise SolutionError(f"{SOLUTION_TRANSCRIPT} is larger than 1 MiB")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SolutionError(f"{SOLUTION_TRANSCRIPT} is not UTF-8 text") from None
    except OSError as exc:
        raise SolutionError(f"cannot read {SOLUTION_TRANSCRIPT}: {exc.strerror}") from exc
    entries: list[TranscriptEntry] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            raise SolutionError(f"{SOLUTION_TRANSCRIPT} line {number} is not JSON") from None
        entry = parse_entry(value)
        if isinstance(entry, RawEntry):
            raise SolutionError(
                f"{SOLUTION_TRANSCRIPT} line {number} is not a transcript entry "
                "(see `atlante-eval schema transcript`)"
            )
        if not isinstance(entry, HeaderEntry):
            entries.append(entry)
    return tuple(entries)


def _solution_names(directory: Path) -> list[str]:
    try:
        info = os.lstat(directory)
    except OSError as exc:
        raise SolutionError(f"cannot inspect the solution directory: {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise SolutionError("the solution directory is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise SolutionError("the solution is not a directory")
    try:
        return sorted(os.listdir(directory))
    except OSError as exc:
        raise SolutionError(f"cannot read the solution directory: {exc.strerror}") from exc


def _real_dir(path: Path, shown: str) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SolutionError(f"{shown} must be a real directory")


def _no_change(path: Path) -> bool:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_size != 0:
        raise SolutionError(f"{SOLUTION_NO_CHANGE} must be an empty regular file")
    return True


def _counters(directory: Path, *, scenario: str, label: str) -> tuple[Solution, ...]:
    _real_dir(directory, f"{SOLUTION_COUNTERS}/")
    counters: list[Solution] = []
    for name in _solution_names(directory):
        if not _LABEL.match(name):
            raise SolutionError(
                f"counter-solution label {name!r} must match {SCENARIO_NAME_PATTERN}"
            )
        try:
            counter = _load(
                directory / name, scenario=scenario, label=f"{label}/{SOLUTION_COUNTERS}/{name}"
            )
        except SolutionError as exc:
            raise SolutionError(f"counter-solution {name!r}: {exc}") from exc
        counters.append(
            Solution(
                scenario=scenario,
                directory=counter.directory,
                label=counter.label,
                files=counter.files,
                delete=counter.delete,
                transcript=counter.transcript,
                counter_label=name,
            )
        )
    return tuple(counters)


def _load(directory: Path, *, scenario: str, label: str, reference: bool = False) -> Solution:
    names = _solution_names(directory)
    allowed = [SOLUTION_FILES, SOLUTION_DELETE, SOLUTION_TRANSCRIPT]
    if reference:
        allowed += [SOLUTION_NO_CHANGE, SOLUTION_COUNTERS]
    unexpected = [n for n in names if n not in allowed]
    if unexpected:
        shown = [f"{a}/" if a in (SOLUTION_FILES, SOLUTION_COUNTERS) else a for a in allowed]
        raise SolutionError(
            f"unexpected entries {', '.join(unexpected)}; a "
            f"{'solution' if reference else 'counter-solution'} holds only {', '.join(shown)}"
        )
    files: list[str] = []
    if SOLUTION_FILES in names:
        _real_dir(directory / SOLUTION_FILES, SOLUTION_FILES)
        files = _walk_files(directory / SOLUTION_FILES)
    delete: tuple[str, ...] = ()
    if SOLUTION_DELETE in names:
        delete = _read_delete_list(directory / SOLUTION_DELETE)
    transcript = None
    if SOLUTION_TRANSCRIPT in names:
        transcript = _read_transcript(directory / SOLUTION_TRANSCRIPT)
    no_change = SOLUTION_NO_CHANGE in names and _no_change(directory / SOLUTION_NO_CHANGE)
    counters: tuple[Solution, ...] = ()
    if SOLUTION_COUNTERS in names:
        counters = _counters(directory / SOLUTION_COUNTERS, scenario=scenario, label=label)
    if no_change and (files or delete):
        raise SolutionError(
            f"a {SOLUTION_NO_CHANGE} solution changes nothing: remove {SOLUTION_FILES}/ and "
            f"{SOLUTION_DELETE}, or the {SOLUTION_NO_CHANGE} file"
        )
    if not (files or delete or transcript is not None or no_change or counters):
        raise SolutionError(
            f"the solution is empty: it needs a file under {SOLUTION_FILES}/, a path in "
            f"{SOLUTION_DELETE} or a {SOLUTION_TRANSCRIPT}"
        )
    return Solution(
        scenario=scenario,
        directory=directory,
        label=label,
        files=tuple(files),
        delete=delete,
        transcript=transcript,
        no_change=no_change,
        counters=counters,
    )


def load_solution(directory: Path, *, scenario: str, label: str) -> Solution | None:
    """Validate the solution directory of ``scenario``; ``None`` when there is none.

    Raises:
        SolutionError: the directory (or a counter-solution in it) is a symlink or
            not a directory, holds other entries than the layout names, is empty,
            holds an unsafe path, or a ``transcript.jsonl`` that is not entries.
    """
    try:
        os.lstat(directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SolutionError(f"cannot inspect the solution directory: {exc.strerror}") from exc
    return _load(directory, scenario=scenario, label=label, reference=True)


def unknown_solution_warnings(
    bases: Iterable[Path], names: set[str], *, root: Path
) -> list[Diagnostic]:
    """Warn about solution directories under ``bases`` that name no discovered scenario."""
    problems: list[Diagnostic] = []
    for base in sorted(set(bases)):
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in names or not entry.is_dir(follow_symlinks=False):
                continue
            problems.append(
                warning(
                    "selftest-solution-invalid",
                    f'solution directory "{entry.name}" names no discovered scenario',
                    source=display_path(Path(entry.path), root),
                    next="rename it after the scenario it solves, or remove it",
                )
            )
    return problems


def _delete(sandbox: Path, relative: str) -> None:
    target = resolve_no_follow(sandbox, relative)
    try:
        info = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        raise SolutionError(
            f"{SOLUTION_DELETE} lists {relative}, which does not exist in the sandbox"
        ) from None
    if stat.S_ISDIR(info.st_mode):
        failure = remove_tree(target)
        if failure is not None:
            raise SolutionError(f"cannot delete {relative}: {failure.path}: {failure.reason}")
    else:
        os.unlink(target)


def _make_parents(sandbox: Path, relative: str) -> None:
    current = sandbox
    for part in relative.split("/")[:-1]:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            current.mkdir()
            continue
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePathError(f"path traverses a symbolic link at {relative}", reason="symlink")
        if not stat.S_ISDIR(info.st_mode):
            raise SolutionError(f"cannot write {relative}: a parent is not a directory")


def _copy(source: Path, sandbox: Path, relative: str) -> None:
    target = resolve_no_follow(sandbox, relative)
    _make_parents(sandbox, relative)
    try:
        src = os.open(source, os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        raise SolutionError(f"cannot read {SOLUTION_FILES}/{relative}: {exc.strerror}") from exc
    try:
        mode = os.fstat(src).st_mode
        if not stat.S_ISREG(mode):
            raise SolutionError(f"{SOLUTION_FILES}/{relative} is not a regular file")
        try:
            dst = os.open(target, os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK, mode & 0o777)
        except IsADirectoryError:
            raise SolutionError(f"cannot write {relative}: a directory is in the way") from None
        try:
            if not stat.S_ISREG(os.fstat(dst).st_mode):
                raise SolutionError(f"cannot write {relative}: it is not a regular file")
            os.ftruncate(dst, 0)
            os.fchmod(dst, mode & 0o777)
            while chunk := os.read(src, _CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view) :]
        finally:
            os.close(dst)
    finally:
        os.close(src)


def apply_solution(solution: Solution, sandbox: Path) -> dict[str, int]:
    """Delete the listed paths, then copy ``files/`` over the sandbox root.

    Returns:
        ``{"deleted": n, "written": m}``.

    Raises:
        SolutionError: a listed path is missing, a target crosses a symbolic link or
            escapes the sandbox, or a file cannot be written.
    """
    try:
        for relative in solution.delete:
            _delete(sandbox, relative)
        for relative in solution.files:
            _copy(solution.directory / SOLUTION_FILES / relative, sandbox, relative)
    except UnsafePathError as exc:
        raise SolutionError(str(exc)) from exc
    except OSError as exc:
        raise SolutionError(f"cannot apply the solution: {exc}") from exc
    return {"deleted": len(solution.delete), "written": len(solution.files)}


def solution_bases(scenarios: Sequence[Scenario], solutions: Path | None) -> list[Path]:
    """The directories that may hold solutions for ``scenarios``."""
    if solutions is not None:
        return [solutions]
    return sorted({s.path.parent / SOLUTIONS_DIRNAME for s in scenarios})


@dataclass(frozen=True, slots=True)
class SolutionSearch:
    """The solutions of the selected scenarios: valid, invalid and missing ones."""

    found: dict[str, Solution]
    invalid: dict[str, Diagnostic]
    missing: dict[str, str]
    """Scenario name -> where its solution was looked for."""
    warnings: list[Diagnostic]


def find_solutions(suite: Suite, solutions: Path | None) -> SolutionSearch:
    """Look up and validate the reference solution of every selected scenario."""
    root = suite.project.root
    found: dict[str, Solution] = {}
    invalid: dict[str, Diagnostic] = {}
    missing: dict[str, str] = {}
    for scenario in suite.scenarios:
        directory = solution_directory(scenario, solutions)
        label = display_path(directory, root)
        try:
            solution = load_solution(directory, scenario=scenario.name, label=label)
        except SolutionError as exc:
            invalid[scenario.name] = error(
                "selftest-solution-invalid",
                f'the reference solution of "{scenario.name}" is invalid: {exc}',
                source=label,
                expected="a directory with files/ (a tree to copy) and/or delete.json "
                "(an array of paths)",
                next="fix the solution directory (see docs/writing-scenarios.md)",
            )
            continue
        if solution is None:
            missing[scenario.name] = label
        else:
            found[scenario.name] = solution
    names = {s.name for s in suite.discovered}
    stray = unknown_solution_warnings(solution_bases(suite.discovered, solutions), names, root=root)
    return SolutionSearch(found=found, invalid=invalid, missing=missing, warnings=stray)
