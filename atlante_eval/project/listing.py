"""Every scenario document a project declares, valid or not: what ``list`` shows.

:func:`load_suite` refuses a project as soon as one document is invalid, which is
right before a run; ``list`` instead shows the scenarios that *are* valid next to
the problems of the others. :func:`discover_all` runs the gates of
:func:`load_suite` but the native outputs' (local and pack scenarios, unique and
well-formed names, ``eval.include``, pack hosts) and returns both, raising only
when the project itself cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..diagnostics import Diagnostic, error, sort_diagnostics, warning
from .config import Project, load_project
from .packs import include_diagnostics, is_included
from .scenarios import Scenario
from .suite import discover_project

__all__ = ["Listing", "discover_all"]


@dataclass(frozen=True, slots=True)
class Listing:
    """A project's discovered scenarios and every problem met finding them."""

    project: Project
    scenarios: tuple[Scenario, ...]
    """The valid scenarios, sorted by name then source (a name declared twice is left out)."""
    diagnostics: tuple[Diagnostic, ...]
    """Errors, then warnings, each in document order."""

    @property
    def ok(self) -> bool:
        """No error was found."""
        return not any(d.severity == "error" for d in self.diagnostics)

    def included(self, scenario: Scenario) -> bool:
        """Whether ``eval.include`` lets ``scenario`` run."""
        return is_included(scenario, self.project.eval.include)


def discover_all(path: Path | str | None = None) -> Listing:
    """Discover the project's scenarios, keeping the valid ones and every problem.

    Raises:
        DiagnosticError: the project's configuration cannot be loaded (exit 2).
    """
    project = load_project(path)
    found = discover_project(project)
    problems = [*found.problems, *include_diagnostics(project, found.suites)]
    kept = tuple(s for s in found.scenarios if s.source not in found.declared_twice)
    problems.extend(_inclusion_diagnostics(project, kept))
    errors_first = sorted(sort_diagnostics(problems), key=lambda d: d.severity != "error")
    return Listing(project, kept, tuple(errors_first))


def _inclusion_diagnostics(project: Project, scenarios: tuple[Scenario, ...]) -> list[Diagnostic]:
    """A pack scenario ``eval.include`` leaves out (a warning), or one for another host."""
    config = project.eval
    found: list[Diagnostic] = []
    for scenario in scenarios:
        if not is_included(scenario, config.include):
            found.append(
                warning(
                    "pack-scenario-not-included",
                    f'pack scenario "{scenario.name}" from {scenario.origin.label} is not run: '
                    "its pack is not in eval.include",
                    source=scenario.source,
                    next=f'add "{scenario.origin.package_name}" to eval.include to run it',
                )
            )
        elif scenario.declared_host is not None and scenario.declared_host != config.host:
            found.append(
                error(
                    "eval-pack-host-incompatible",
                    f'pack scenario "{scenario.name}" from {scenario.origin.label} declares '
                    f'host "{scenario.declared_host}", but the project runs "{config.host}"',
                    source=scenario.source,
                    expected=f'a suite for "{config.host}" or a host-neutral suite',
                    next="remove the pack from eval.include, or switch eval.host",
                )
            )
    return found
