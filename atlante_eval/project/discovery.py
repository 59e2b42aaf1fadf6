"""Find, parse and validate the scenario documents a glob selects.

The glob is matched with wcmatch (``**``, ``*``, ``?``, character classes and
braces), anchored at the root. Only regular files are candidates: symbolic links
are neither followed nor matched, and ``.git`` and ``node_modules`` directories are
never entered. ``.json`` documents are strict JSON; ``.jsonc`` documents allow
comments and trailing commas.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from wcmatch import glob as wcglob
from wcmatch._wcparse import PatternLimitException  # raised by wcmatch, exported only here

from .._util.jsondoc import DocumentParseError, DocumentReadError, parse_document, read_document
from .._util.paths import FORBIDDEN_SEGMENTS, split_segments
from .._util.patterns import PATTERN_TIMEOUT_MS, has_nested_quantifier
from ..diagnostics import Diagnostic, Location, error, sort_diagnostics, warning
from .scenarios import (
    EXTENDED_SCENARIO_SCHEMA_URI,
    SCENARIO_MODELS,
    SCENARIO_SCHEMA_URI,
    Origin,
    Scenario,
)
from .validation import BEHAVIOUR_CHECK_TAGS, location_of, validation_diagnostics

__all__ = [
    "GLOB_FLAGS",
    "GLOB_LIMIT",
    "Discovery",
    "PatternLimitException",
    "discover_scenarios",
    "extension_check_diagnostics",
    "fixture_problem",
    "glob_files",
]

#: wcmatch flags: ``**`` spans directories, dotfiles match, braces expand.
GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.BRACE
#: Most patterns a glob's braces may expand to (wcmatch's default limit).
GLOB_LIMIT = 1000
_MAX_FIXTURE_DEPTH = 64
_DRIVE = re.compile(r"^[A-Za-z]:")
_SCENARIO_DOCS = "see docs/scenarios.md"
_FIXTURE_EXPECTED = "a real directory inside the root, without symlinks, .git or node_modules"


@dataclass(frozen=True, slots=True)
class Discovery:
    """Scenarios found under one root, sorted by name, and the problems met."""

    scenarios: tuple[Scenario, ...]
    diagnostics: tuple[Diagnostic, ...]


def extension_check_diagnostics(
    value: dict[str, Any], *, source: str, text: str
) -> list[Diagnostic]:
    """Refuse behaviour checks in a document that declares the reference's v0.1 schema."""
    checks = value.get("checks")
    if value.get("$schema") != SCENARIO_SCHEMA_URI or not isinstance(checks, list):
        return []
    problems = []
    for index, check in enumerate(checks):
        kind = check.get("type") if isinstance(check, dict) else None
        if kind not in BEHAVIOUR_CHECK_TAGS:
            continue
        pointer = f"/checks/{index}/type"
        problems.append(
            error(
                "scenario-extension-check",
                f'check type "{kind}" is an atlante-eval extension (a behaviour check), '
                "which the reference's v0.1 scenario schema does not admit",
                source=source,
                pointer=pointer,
                location=location_of(text, pointer),
                expected=f'a v0.1 check type, or "$schema": "{EXTENDED_SCENARIO_SCHEMA_URI}"',
                next=f'declare "$schema": "{EXTENDED_SCENARIO_SCHEMA_URI}" (atlante-eval\'s '
                "own scenario schema, printed by `atlante-eval schema scenario --extended`) "
                "to use behaviour checks, or remove the check",
            )
        )
    return problems


def _walk_files(root: Path, start: str) -> Iterator[str]:
    """Yield root-relative ``/`` paths of regular files under ``root/start`` (no symlinks)."""
    stack = [start]
    while stack:
        relative = stack.pop()
        directory = root / relative if relative else root
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            child = f"{relative}/{entry.name}" if relative else entry.name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in FORBIDDEN_SEGMENTS:
                        stack.append(child)
                elif entry.is_file(follow_symlinks=False):
                    yield child
            except OSError:
                continue


def glob_files(root: Path, pattern: str) -> list[str]:
    """Return the sorted root-relative paths of regular files matching ``pattern``.

    Only the pattern's literal directory prefix is walked, so a narrow glob stays
    fast in a large project. The prefix itself must not cross a symlink.
    """
    parts = pattern.split("/")
    prefix: list[str] = []
    for part in parts[:-1]:
        if wcglob.is_magic(part, flags=GLOB_FLAGS):
            break
        prefix.append(part)
    current = root
    for part in prefix:
        current = current / part
        try:
            info = os.lstat(current)
        except OSError:
            return []
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            return []
        if part in FORBIDDEN_SEGMENTS:
            return []
    matcher = wcglob.compile(pattern, flags=GLOB_FLAGS)
    return sorted(path for path in _walk_files(root, "/".join(prefix)) if matcher.match(path))


def fixture_problem(root: Path, relative: str) -> str | None:
    """Return why ``root/relative`` is not a usable fixture directory, or ``None``.

    The fixture must be strictly inside ``root``, reached without symlinks, a real
    directory, and contain no symlink, no ``.git`` or ``node_modules`` entry, and
    no name that is not UTF-8 (reports, fingerprints and scenario paths are text).
    """
    parts = split_segments(relative)
    if not parts or ".." in parts:
        return "fixture must resolve inside the project"
    current = root
    for part in parts:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return f"fixture does not exist: {relative}"
        except OSError as exc:
            return f"fixture cannot be inspected: {exc.strerror}"
        if stat.S_ISLNK(info.st_mode):
            return f"fixture path traverses a symbolic link: {relative}"
    if not stat.S_ISDIR(info.st_mode):
        return f"fixture is not a directory: {relative}"
    problems = _fixture_tree_problems(current, relative)
    if len(problems) > _MAX_FIXTURE_PROBLEMS:
        problems = [*problems[:_MAX_FIXTURE_PROBLEMS], "and more"]
    return "; ".join(problems) or None


#: Problems of one fixture tree listed in its diagnostic before "and more".
_MAX_FIXTURE_PROBLEMS = 10


def _fixture_tree_problems(directory: Path, label: str) -> list[str]:
    """Every reason the tree below ``directory`` is unsafe (a few past the listed cap)."""
    problems: list[str] = []
    stack: list[tuple[Path, str, int]] = [(directory, label, 0)]
    while stack and len(problems) <= _MAX_FIXTURE_PROBLEMS:
        current, shown, depth = stack.pop()
        if depth > _MAX_FIXTURE_DEPTH:
            problems.append(f"fixture is nested deeper than {_MAX_FIXTURE_DEPTH} levels: {shown}")
            continue
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"fixture directory is unreadable: {shown} ({exc.strerror})")
            continue
        for entry in entries:
            child = f"{shown}/{_shown_name(entry.name)}"
            if _shown_name(entry.name) != entry.name:
                problems.append(f"fixture file name is not valid UTF-8: {child}")
            elif entry.name in FORBIDDEN_SEGMENTS:
                problems.append(f"fixture contains a forbidden entry: {child}")
            elif entry.is_symlink():
                problems.append(f"fixture contains a symbolic link: {child}")
            elif entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), child, depth + 1))
    return sorted(problems)


def _shown_name(name: str) -> str:
    """``name`` with bytes that are not UTF-8 shown as ``\\xNN`` (file names are bytes)."""
    return os.fsencode(name).decode("utf-8", errors="backslashreplace")


def _glob_problem(pattern: str) -> str | None:
    normalized = pattern.replace("\\", "/")
    if normalized.startswith("/") or _DRIVE.match(normalized):
        return "the glob must be relative to the root, not absolute"
    if ".." in normalized.split("/"):
        return "the glob must not climb out of the root with '..'"
    try:
        wcglob.compile(_normalize_glob(pattern), flags=GLOB_FLAGS, limit=GLOB_LIMIT)
    except PatternLimitException:
        return f"its braces expand to more than {GLOB_LIMIT} patterns"
    return None


def _normalize_glob(pattern: str) -> str:
    """Use ``/`` separators and drop leading ``./`` segments."""
    normalized = pattern.replace("\\", "/")
    while normalized.startswith("./"):
        normalized = normalized[2:].lstrip("/")
    return normalized


def discover_scenarios(
    root: Path,
    pattern: str,
    *,
    origin: Origin,
    source_prefix: str = "",
    glob_source: str | None = None,
    glob_pointer: str = "/eval/scenarios",
    glob_location: Location | None = None,
) -> Discovery:
    """Discover and validate the scenario documents ``pattern`` selects under ``root``.

    Args:
        root: the origin root (project root or pack root).
        pattern: the root-relative glob.
        origin: recorded on each scenario.
        source_prefix: prepended to root-relative paths in diagnostics and sources
            (``<pkg>@<version>/`` for packs).
        glob_source: the file that declared the glob, for glob diagnostics.
        glob_pointer: where the glob sits in that file.
        glob_location: line and column of the glob in that file.
    """
    where = {"source": glob_source, "pointer": glob_pointer, "location": glob_location}
    matches = _glob_matches(root, pattern, where)
    if isinstance(matches, Diagnostic):
        return Discovery((), (matches,))
    return _load_all(root, matches, origin=origin, source_prefix=source_prefix)


def _glob_matches(root: Path, pattern: str, where: Mapping[str, object]) -> list[str] | Diagnostic:
    """The root-relative files ``pattern`` selects, or why it selects none.

    ``where`` is the glob's place in the file that declared it (``source``,
    ``pointer``, ``location``), for the diagnostic.
    """
    problem = _glob_problem(pattern)
    if problem:
        return error(
            "invalid-scenario-glob",
            f"invalid scenario glob {pattern[:200]!r}: {problem}",
            **where,
            expected="a root-relative glob such as eval/scenarios/*.eval.json*",
            next="write the glob relative to the root, without a leading / or '..'",
        )
    matches = glob_files(root, _normalize_glob(pattern))
    if not matches:
        return error(
            "empty-scenario-glob",
            f"scenario glob {pattern!r} matches no file",
            **where,
            next="author scenario documents under the configured location, or fix the glob",
        )
    return list(matches)


def _load_all(
    root: Path, matches: Sequence[str], *, origin: Origin, source_prefix: str
) -> Discovery:
    """Load every matched document; refuse a name declared twice and a bad fixture.

    A fixture is checked once, however many scenarios share it, and its problem
    is reported once (:func:`_fixture_diagnostics`).
    """
    diagnostics: list[Diagnostic] = []
    first_source: dict[str, str] = {}
    fixtures: dict[str, str | None] = {}
    bad_fixture_users: dict[str, list[Scenario]] = {}
    by_name: dict[str, Scenario] = {}
    for relative in matches:
        source = f"{source_prefix}{relative}"
        scenario, problems = _load_one(root / relative, source, origin)
        diagnostics.extend(problems)
        if scenario is None:
            continue
        earlier = first_source.setdefault(scenario.name, source)
        if earlier != source:
            diagnostics.append(
                error(
                    "duplicate-scenario-name",
                    f'scenario name "{scenario.name}" is declared by both {earlier} and {source}',
                    source=source,
                    pointer="/name",
                    location=location_of(scenario.text, "/name"),
                    next="give every scenario a unique name",
                )
            )
            continue
        fixture = scenario.document.task.fixture
        if fixture not in fixtures:
            fixtures[fixture] = fixture_problem(root, fixture)
        if fixtures[fixture]:
            bad_fixture_users.setdefault(fixture, []).append(scenario)
            continue
        by_name[scenario.name] = scenario
    diagnostics += _fixture_diagnostics(fixtures, bad_fixture_users)
    ordered = tuple(by_name[name] for name in sorted(by_name))
    return Discovery(ordered, tuple(sort_diagnostics(diagnostics)))


def _fixture_diagnostics(
    problems: Mapping[str, str | None], users: Mapping[str, Sequence[Scenario]]
) -> list[Diagnostic]:
    """One ``invalid-scenario-fixture`` per bad fixture, at its first scenario, naming the rest."""
    found = []
    for fixture, scenarios in users.items():
        first, *others = scenarios
        shared = (
            f" (fixture {fixture} is also used by {', '.join(s.name for s in others)})"
            if others
            else ""
        )
        found.append(
            error(
                "invalid-scenario-fixture",
                f"{problems[fixture]}{shared}",
                source=first.source,
                pointer="/task/fixture",
                location=location_of(first.text, "/task/fixture"),
                expected=_FIXTURE_EXPECTED,
                next="point task.fixture at a directory of plain files and folders inside the root",
            )
        )
    return found


def _load_one(path: Path, source: str, origin: Origin) -> tuple[Scenario | None, list[Diagnostic]]:
    try:
        text = read_document(path)
    except DocumentReadError as exc:
        return None, [
            error(
                "scenario-unreadable",
                f"scenario document {exc}",
                source=source,
                next="save the scenario as a UTF-8 JSON file of at most 1 MiB, "
                "or narrow eval.scenarios",
            )
        ]
    try:
        value = parse_document(text, jsonc=path.name.endswith(".jsonc"))
    except DocumentParseError as exc:
        return None, [
            error(
                "invalid-json",
                f"malformed {'JSONC' if path.name.endswith('.jsonc') else 'JSON'}: {exc.message}",
                source=source,
                location=Location(line=exc.line, column=exc.column),
                next="fix the syntax error at the position shown",
            )
        ]
    if not isinstance(value, dict):
        return None, [
            error(
                "invalid-eval-scenario",
                "a scenario document must be a JSON object",
                source=source,
                location=Location(line=1, column=1),
                next=f"write the scenario as a JSON object; {_SCENARIO_DOCS}",
            )
        ]
    declared = value.get("$schema")
    model = SCENARIO_MODELS.get(declared) if isinstance(declared, str) else None
    if model is None:
        return None, [
            error(
                "unsupported-schema",
                f"unsupported scenario $schema {declared!r}"
                if declared is not None
                else "the scenario document has no $schema",
                source=source,
                pointer="/$schema",
                location=location_of(text, "/$schema"),
                expected=SCENARIO_SCHEMA_URI,
                next=f'set "$schema" to "{SCENARIO_SCHEMA_URI}" (or to '
                f'"{EXTENDED_SCENARIO_SCHEMA_URI}" to use atlante-eval\'s behaviour checks)',
            )
        ]
    refused = extension_check_diagnostics(value, source=source, text=text)
    if refused:
        # Read the rest as the extended schema would, so the document's other problems
        # are reported too (not only once the behaviour checks are fixed).
        value = {**value, "$schema": EXTENDED_SCENARIO_SCHEMA_URI}
        model = SCENARIO_MODELS[EXTENDED_SCENARIO_SCHEMA_URI]
    try:
        document = model.model_validate(value)
    except ValidationError as exc:
        return None, sort_diagnostics(
            [
                *refused,
                *validation_diagnostics(
                    exc,
                    code="invalid-eval-scenario",
                    source=source,
                    text=text,
                    value=value,
                    next_step=f"fix the value at the position shown; {_SCENARIO_DOCS}",
                ),
            ]
        )
    if refused:
        return None, refused
    scenario = Scenario(document=document, source=source, path=path, origin=origin, text=text)
    return scenario, _pattern_warnings(scenario)


def _patterns(scenario: Scenario) -> list[tuple[str, str]]:
    """Every regular expression of the scenario's checks, as ``(pointer, pattern)``."""
    return [
        (f"/checks/{index}/{key}", pattern)
        for index, check in enumerate(scenario.document.checks)
        for key, pattern in check.patterns()
    ]


def _pattern_warnings(scenario: Scenario) -> list[Diagnostic]:
    """Warn about regular expressions whose nested quantifiers may backtrack for long."""
    found = []
    for pointer, source in _patterns(scenario):
        if has_nested_quantifier(source):
            found.append(
                warning(
                    "pattern-nested-quantifier",
                    f"pattern {json.dumps(source, ensure_ascii=True)} repeats a repeated group; "
                    f"it can take exponential time, and a search is stopped after "
                    f"{PATTERN_TIMEOUT_MS} ms (the check then fails)",
                    source=scenario.source,
                    pointer=pointer,
                    location=location_of(scenario.text, pointer),
                    next="rewrite the group without an inner + or * (e.g. (a+)+ as a+)",
                )
            )
    return found
