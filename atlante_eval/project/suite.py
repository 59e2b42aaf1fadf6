"""Every validation gate that runs before a trial, in the reference's order.

:func:`load_suite` loads the project, discovers local and pack scenarios, checks
names, ``eval.include``, the ``--scenario`` filter and pack host compatibility,
and verifies the native outputs of the last build. It returns a :class:`Suite`
ready to plan, or raises :class:`DiagnosticError` with every problem found.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wcmatch import fnmatch

from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from .config import Project, load_project
from .discovery import GLOB_LIMIT, PatternLimitException, discover_scenarios
from .native import NativeOutputs, verify_native_outputs
from .packs import PackSuites, discover_pack_suites, include_diagnostics, is_included
from .preflight import agent_diagnostics, git_diagnostics, name_diagnostics
from .scenarios import Origin, Scenario
from .validation import location_of

__all__ = ["Discovery", "Suite", "discover_project", "load_suite", "pack_setup_warnings"]

_NAME_FLAGS = fnmatch.BRACE


@dataclass(frozen=True, slots=True)
class Suite:
    """A validated, selected set of scenarios and the verified harness they run against."""

    project: Project
    scenarios: tuple[Scenario, ...]
    """Selected scenarios, sorted by name."""
    native: NativeOutputs | None
    """Verified native outputs (``None`` only when verification was skipped)."""
    warnings: tuple[Diagnostic, ...]
    discovered: tuple[Scenario, ...]
    """Every discovered scenario, before filtering and inclusion."""


@dataclass(frozen=True, slots=True)
class Discovery:
    """Every scenario the project and its packs declare, and the problems finding them."""

    scenarios: tuple[Scenario, ...]
    """Sorted by name, then source."""
    suites: PackSuites
    """The packs' suites."""
    problems: tuple[Diagnostic, ...]
    """Discovery's errors and warnings, then names declared twice, then invalid names."""
    declared_twice: frozenset[str]
    """Sources of the scenarios whose name an earlier one already declared."""


def discover_project(project: Project) -> Discovery:
    """Discover the project's and the packs' scenarios, raising nothing (``load_suite``
    refuses any error; ``list`` keeps the valid scenarios next to the problems)."""
    config = project.eval
    problems: list[Diagnostic] = []
    local: tuple[Scenario, ...] = ()
    if config.scenarios is not None:
        found = discover_scenarios(
            project.root,
            config.scenarios,
            origin=Origin(kind="project", root=project.root),
            glob_source=project.source,
            glob_location=location_of(project.text, "/eval/scenarios"),
        )
        local = found.scenarios
        problems.extend(found.diagnostics)
    suites = discover_pack_suites(project)
    problems.extend(suites.diagnostics)
    discovered = tuple(sorted((*local, *suites.scenarios), key=lambda s: (s.name, s.source)))
    duplicates = _duplicates(discovered)
    problems.extend(duplicates)
    problems.extend(name_diagnostics(discovered))
    twice = frozenset(d.source for d in duplicates if d.source is not None)
    return Discovery(discovered, suites, tuple(problems), twice)


def _duplicates(scenarios: Sequence[Scenario]) -> list[Diagnostic]:
    seen: dict[str, Scenario] = {}
    problems = []
    for scenario in scenarios:
        earlier = seen.get(scenario.name)
        if earlier is None:
            seen[scenario.name] = scenario
            continue
        problems.append(
            error(
                "duplicate-scenario-name",
                f'scenario name "{scenario.name}" is declared by both {earlier.source} '
                f"and {scenario.source}",
                source=scenario.source,
                pointer="/name",
                next="rename one of the scenarios",
            )
        )
    return problems


def _check_filters(filters: Sequence[str]) -> None:
    """Refuse a ``--scenario`` pattern whose braces expand to too many patterns."""
    for pattern in filters:
        try:
            fnmatch.compile(pattern, flags=_NAME_FLAGS, limit=GLOB_LIMIT)
        except PatternLimitException:
            raise DiagnosticError(
                [
                    error(
                        "invalid-option",
                        f"--scenario {pattern[:60]!r} expands to more than {GLOB_LIMIT} patterns",
                        next="use fewer brace alternatives, or several --scenario options",
                    )
                ]
            ) from None


def load_suite(
    path: Path | str | Project | None = None,
    *,
    scenario_filter: Sequence[str] = (),
    verify_native: bool = True,
) -> Suite:
    """Run every pre-trial gate for the project at ``path`` and return the selected suite.

    Args:
        path: project directory or configuration file (default: cwd), or the
            project already loaded from one (it is not read again).
        scenario_filter: names or glob patterns (``*``, ``?``, ``[...]``, ``{a,b}``)
            to keep (``--scenario``); empty keeps all.
        verify_native: verify the native outputs of the last build (gate 10), then
            that every ``task.agent`` is defined and ``git`` is on ``PATH``.

    Raises:
        DiagnosticError: any validation problem (exit code 2); warnings ride along.
    """
    project = path if isinstance(path, Project) else load_project(path)
    config = project.eval
    discovered, suites, warnings = _discover(project)
    include_problems = include_diagnostics(project, suites)
    if include_problems:
        raise DiagnosticError(include_problems)
    kept, left_out = _included(_filtered(discovered, scenario_filter), config.include)
    warnings += left_out
    incompatible = _host_diagnostics(kept, config.host)
    if incompatible:
        raise DiagnosticError([*incompatible, *warnings])
    native = verify_native_outputs(project.root, config.host) if verify_native else None
    if native is not None:
        environment = [*agent_diagnostics(kept, native, config.host), *git_diagnostics()]
        if environment:
            raise DiagnosticError([*environment, *warnings])
    return Suite(
        project=project,
        scenarios=tuple(sorted(kept, key=lambda s: s.name)),
        native=native,
        warnings=tuple(warnings),
        discovered=discovered,
    )


def _discover(project: Project) -> tuple[tuple[Scenario, ...], PackSuites, list[Diagnostic]]:
    """Discover the project's and the packs' scenarios, sorted; their names must be unique.

    Returns:
        Every scenario found, the packs' suites, and the warnings of discovery.

    Raises:
        DiagnosticError: any discovery error, or a name used twice or not a name.
    """
    found = discover_project(project)
    problems = list(found.problems)
    if any(problem.severity == "error" for problem in problems):
        raise DiagnosticError(problems)
    return found.scenarios, found.suites, [p for p in problems if p.severity == "warning"]


def _filtered(discovered: Sequence[Scenario], scenario_filter: Sequence[str]) -> list[Scenario]:
    """The scenarios ``--scenario`` keeps (all without one); each pattern must match one.

    Raises:
        DiagnosticError: ``invalid-option`` for a pattern that expands too far,
            ``unknown-scenario-filter`` for one that matches nothing.
    """
    _check_filters(scenario_filter)
    if not scenario_filter:
        return list(discovered)
    names = sorted({s.name for s in discovered})
    unknown = sorted(
        f for f in set(scenario_filter) if not fnmatch.filter(names, f, flags=_NAME_FLAGS)
    )
    if unknown:
        raise DiagnosticError(
            [
                error(
                    "unknown-scenario-filter",
                    f"--scenario matches no discovered scenario: {', '.join(unknown)}",
                    expected=", ".join(names) or "(none discovered)",
                    next="check the names with `atlante-eval list`",
                )
            ]
        )
    patterns = list(scenario_filter)
    return [s for s in discovered if fnmatch.fnmatch(s.name, patterns, flags=_NAME_FLAGS)]


def _included(
    selected: Sequence[Scenario], include: list[str] | None
) -> tuple[list[Scenario], list[Diagnostic]]:
    """Keep the scenarios ``eval.include`` lets run; warn about each pack scenario it does not."""
    kept: list[Scenario] = []
    warnings: list[Diagnostic] = []
    for scenario in selected:
        if is_included(scenario, include):
            kept.append(scenario)
            continue
        warnings.append(
            warning(
                "pack-scenario-not-included",
                f'pack scenario "{scenario.name}" from {scenario.origin.label} is not run: '
                "its pack is not in eval.include",
                source=scenario.source,
                next=f'add "{scenario.origin.package_name}" to eval.include to run it',
            )
        )
    return kept, warnings


def _host_diagnostics(kept: Sequence[Scenario], host: str) -> list[Diagnostic]:
    """An error for each pack scenario that declares a host other than the project's."""
    return [
        error(
            "eval-pack-host-incompatible",
            f'pack scenario "{s.name}" from {s.origin.label} declares host "{s.declared_host}", '
            f'but the project runs "{host}"',
            source=s.source,
            expected=f'a suite for "{host}" or a host-neutral suite',
            next="remove the pack from eval.include, or switch eval.host",
        )
        for s in kept
        if s.declared_host is not None and s.declared_host != host
    ]


def pack_setup_warnings(suite: Suite) -> list[Diagnostic]:
    """Warn once per included pack scenario that runs ``setup`` commands before its trials.

    A pack's setup is code its author wrote, run on this machine before every
    trial: under ``none`` with the user's access and full environment, under ``os``
    confined, with only the allowlisted environment and ``--pass-env``.
    """
    confined = suite.project.eval.isolation == "os"
    how = (
        "confined (--isolation os), with only the allowlisted environment and --pass-env"
        if confined
        else "with your user's access and your full environment (every secret in it)"
    )
    return [
        warning(
            "pack-setup-commands",
            f'pack scenario "{s.name}" from {s.origin.label} runs setup commands before each '
            f"trial, {how}: {json.dumps(list(s.document.task.setup))}",
            source=s.source,
            pointer="/task/setup",
            location=location_of(s.text, "/task/setup"),
            next="read what the pack's setup does before you run it"
            + ("" if confined else "; run packs you did not write with --isolation os"),
        )
        for s in suite.scenarios
        if s.origin.kind == "package" and s.document.task.setup
    ]
