"""Pack suites: scenario suites shipped by npm packs the project selects.

A *pack* is an npm package under the project's ``node_modules`` whose
``package.json`` declares ``"atlante": {"format": 1}``. The project selects packs
through ``extends`` (package locators such as ``@acme/review-pack`` or
``@acme/review-pack/strict``), directly or through the presets it extends. A pack's
root preset (``atlante.jsonc`` or ``atlante.json`` at the pack root) may carry
``eval`` metadata describing a scenario suite. Selecting a pack never runs its
suite: ``eval.include`` is the explicit permission.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError, ValidationInfo, field_validator

from .._util.jsondoc import (
    DocumentParseError,
    DocumentReadError,
    locate_pointers,
    parse_document,
    read_document,
)
from ..diagnostics import Diagnostic, Location, error
from .config import SCHEMA_URIS, HostName, Project
from .discovery import discover_scenarios
from .scenarios import Origin, Scenario
from .validation import NonEmptyStr, SandboxPath, StrictModel, location_of, validation_diagnostics

__all__ = [
    "Pack",
    "PackEvalMetadata",
    "PackSuites",
    "discover_pack_suites",
    "include_diagnostics",
    "is_included",
    "parse_package_locator",
    "select_packs",
]

_NAME = r"(?:@[a-z0-9~][a-z0-9._~-]*/)?[a-z0-9~][a-z0-9._~-]*"
_PACKAGE_LOCATOR = re.compile(rf"^(?P<name>{_NAME})(?:/(?P<sub>[^\\\0:]+))?$")
_MAX_PRESETS = 256


class PackEvalMetadata(StrictModel):
    """The ``eval`` key of a pack's root preset."""

    host: HostName | None = None
    """The suite's intended host; absent means host-neutral."""
    scenarios: NonEmptyStr
    """Glob of scenario documents, relative to the pack root."""
    fixtures: SandboxPath | None = None
    """The pack's fixture tree (documentation only)."""
    report: SandboxPath | None = None
    """Where the pack publishes a self-reported report."""
    source: SandboxPath | None = None
    """Where the pack's eval sources live inside its repository."""

    @field_validator("host")
    @classmethod
    def _host_for_version(cls, value: str | None, info: ValidationInfo) -> str | None:
        context = info.context if isinstance(info.context, dict) else {}
        if context.get("schema_version") == "0.1" and value not in (None, "opencode"):
            raise ValueError('v0.1 presets admit only "opencode"')
        return value


@dataclass(slots=True)
class Pack:
    """A pack the project selected."""

    name: str
    version: str
    root: Path
    locators: set[str] = field(default_factory=set)
    metadata: PackEvalMetadata | None = None
    preset_name: str = "atlante.jsonc"
    """File name of the root preset that declared ``metadata``."""
    preset_text: str = ""
    """Text of that root preset, for diagnostic positions."""

    @property
    def label(self) -> str:
        """``<name>@<version>``."""
        return f"{self.name}@{self.version}"


def parse_package_locator(value: str) -> tuple[str, str | None] | None:
    """Split a package locator into (package name, sub-path), or ``None`` if it is not one."""
    if value.startswith((".", "/")) or "://" in value:
        return None
    match = _PACKAGE_LOCATOR.match(value)
    if not match:
        return None
    sub = match.group("sub")
    if sub is not None and any(part in ("", ".", "..") for part in sub.split("/")):
        return None
    return match.group("name"), sub


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _find_package(name: str, start: Path, boundary: Path) -> Path | None:
    current = start
    while True:
        candidate = current / "node_modules" / name
        if (candidate / "package.json").is_file() and _inside(candidate, boundary):
            return candidate
        if current == boundary or current.parent == current or not _inside(current, boundary):
            return None
        current = current.parent


def _read_package(root: Path) -> tuple[str, str] | None:
    try:
        manifest = json.loads(read_document(root / "package.json", follow_symlinks=True))
    except (DocumentReadError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    marker = manifest.get("atlante")
    if (
        not isinstance(marker, dict)
        or marker.get("format") != 1
        or isinstance(marker.get("format"), bool)
    ):
        return None
    name, version = manifest.get("name"), manifest.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        return None
    return name, version


def _preset_file(target: Path) -> Path | None:
    if target.is_file():
        return target
    for name in ("atlante.jsonc", "atlante.json"):
        if (target / name).is_file():
            return target / name
    return None


def _extends_of(path: Path) -> list[str]:
    """Return a preset document's ``extends`` list; unreadable presets yield nothing."""
    try:
        value = parse_document(
            read_document(path, follow_symlinks=True), jsonc=path.name.endswith(".jsonc")
        )
    except (DocumentReadError, DocumentParseError):
        return []
    extends = value.get("extends") if isinstance(value, dict) else None
    if isinstance(extends, str):
        return [extends]
    if isinstance(extends, list):
        return [item for item in extends if isinstance(item, str)]
    return []


def select_packs(project: Project) -> dict[str, Pack]:
    """Return the packs the project selects through ``extends``, transitively, by name."""
    packs: dict[str, Pack] = {}
    queue: list[tuple[str, Path]] = [(loc, project.root) for loc in project.document.extends_list]
    visited: set[Path] = set()
    while queue and len(visited) < _MAX_PRESETS:
        locator, base = queue.pop(0)
        preset: Path | None
        if locator.startswith(("./", "../")):
            target = (base / locator).resolve()
            if not _inside(target, project.root):
                continue
            preset = _preset_file(target)
        else:
            parsed = parse_package_locator(locator)
            if parsed is None:
                continue
            name, sub = parsed
            root = _find_package(name, base, project.root)
            identity = _read_package(root) if root else None
            if root is None or identity is None:
                continue
            pack = packs.setdefault(name, Pack(name=identity[0], version=identity[1], root=root))
            pack.locators.add(locator)
            preset = _preset_file(root / sub) if sub else _preset_file(root)
        if preset is None or preset in visited:
            continue
        visited.add(preset)
        queue.extend((child, preset.parent) for child in _extends_of(preset))
    return packs


def _load_metadata(pack: Pack) -> list[Diagnostic]:
    preset = next(
        (pack.root / n for n in ("atlante.jsonc", "atlante.json") if (pack.root / n).exists()),
        None,
    )
    if preset is None:
        return []
    source = f"{pack.label}/{preset.name}"
    location: Location | None = None
    try:
        text = read_document(preset, follow_symlinks=True)
        value = parse_document(text, jsonc=preset.name.endswith(".jsonc"))
    except (DocumentReadError, DocumentParseError) as exc:
        if isinstance(exc, DocumentParseError):
            location = Location(line=exc.line, column=exc.column)
        return [
            error(
                "pack-eval-unreadable",
                f"cannot read the root preset of {pack.label}",
                source=source,
                location=location,
                cause=str(exc),
                next="reinstall the pack, or remove it from extends",
            )
        ]
    if not isinstance(value, dict) or "eval" not in value:
        return []
    declared = value.get("$schema")
    version = SCHEMA_URIS.get(declared, "0.2") if isinstance(declared, str) else "0.2"
    try:
        pack.metadata = PackEvalMetadata.model_validate(
            value["eval"], context={"schema_version": version}
        )
    except ValidationError as exc:
        return validation_diagnostics(
            exc,
            code="invalid-pack-eval",
            source=source,
            text=text,
            base_pointer=("eval",),
            value=value["eval"],
            next_step=f"report it to the author of {pack.name}, or remove the pack from extends",
        )
    pack.preset_name = preset.name
    pack.preset_text = text
    return []


@dataclass(frozen=True, slots=True)
class PackSuites:
    """Every selected pack and the scenarios their suites declare."""

    packs: dict[str, Pack]
    scenarios: tuple[Scenario, ...]
    diagnostics: tuple[Diagnostic, ...]


def discover_pack_suites(project: Project) -> PackSuites:
    """Select packs, read their eval metadata and discover their scenarios."""
    packs = select_packs(project)
    diagnostics: list[Diagnostic] = []
    scenarios: list[Scenario] = []
    for pack in sorted(packs.values(), key=lambda p: p.name):
        diagnostics.extend(_load_metadata(pack))
        if pack.metadata is None:
            continue
        origin = Origin(
            kind="package",
            root=pack.root,
            package_name=pack.name,
            package_version=pack.version,
            locators=tuple(sorted(pack.locators)),
        )
        found = discover_scenarios(
            pack.root,
            pack.metadata.scenarios,
            origin=origin,
            source_prefix=f"{pack.label}/",
            glob_source=f"{pack.label}/{pack.preset_name}",
            glob_location=location_of(pack.preset_text, "/eval/scenarios"),
        )
        diagnostics.extend(found.diagnostics)
        scenarios.extend(
            Scenario(
                document=s.document,
                source=s.source,
                path=s.path,
                origin=s.origin,
                declared_host=pack.metadata.host,
                text=s.text,
            )
            for s in found.scenarios
        )
    return PackSuites(packs, tuple(scenarios), tuple(diagnostics))


def is_included(scenario: Scenario, include: list[str] | None) -> bool:
    """Whether ``include`` opts in ``scenario`` (project scenarios always are)."""
    origin = scenario.origin
    if origin.kind == "project":
        return True
    allowed = set(include or ())
    return origin.package_name in allowed or bool(allowed.intersection(origin.locators))


def include_diagnostics(project: Project, suites: PackSuites) -> list[Diagnostic]:
    """Validate each ``eval.include`` entry against the selected packs and their suites."""
    include = project.eval.include or []
    positions: dict[str, tuple[int, int]] = locate_pointers(project.text)
    problems: list[Diagnostic] = []
    with_suite = {s.origin.root for s in suites.scenarios}
    for index, entry in enumerate(include):
        pointer = f"/eval/include/{index}"
        position: Any = positions.get(pointer)
        where: dict[str, Any] = {"source": project.source, "pointer": pointer}
        if position:
            where["location"] = {"line": position[0], "column": position[1]}
        parsed = parse_package_locator(entry)
        if parsed is None:
            problems.append(
                error(
                    "invalid-eval-include",
                    f"eval.include entry {entry!r} is not a package locator",
                    expected="a package name such as @acme/review-pack, or a package preset "
                    "locator such as @acme/review-pack/strict",
                    next="name the pack by its package name, as in extends",
                    **where,
                )
            )
            continue
        name, sub = parsed
        pack = suites.packs.get(name) or next(
            (p for p in suites.packs.values() if p.name == name), None
        )
        if pack is None or (sub is not None and entry not in pack.locators):
            problems.append(
                error(
                    "eval-include-not-found",
                    f"eval.include locator {entry!r} names no pack the project selects",
                    expected="a pack reached through the project's extends",
                    next=f'install the package and add "{entry}" to extends, '
                    "or remove it from eval.include",
                    **where,
                )
            )
        elif pack.root not in with_suite:
            problems.append(
                error(
                    "eval-include-no-suite",
                    f"eval.include locator has no pack eval suite: {entry}",
                    next="remove it from eval.include, or use a pack version that ships "
                    "eval scenarios",
                    **where,
                )
            )
    return problems
