"""Gates that catch, before any trial, what would otherwise fail every trial.

Each returns diagnostics (never raises), so :func:`atlante_eval.project.suite.load_suite`
and the run can report all of them at once:

* :func:`name_diagnostics`: a scenario name too long for the directories named
  after it (``ENAMETOOLONG`` in every trial);
* :func:`agent_diagnostics`: a ``task.agent`` that no native output defines and
  the host does not ship;
* :func:`git_diagnostics`: no ``git`` on ``PATH`` (every sandbox baseline needs it);
* :func:`model_diagnostics`: OpenCode without ``eval.model``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any

from .._util.environment import git_env
from ..diagnostics import Diagnostic, error, warning
from .native import NativeOutputs, native_host
from .scenarios import Scenario
from .validation import location_of

__all__ = [
    "MAX_SCENARIO_NAME",
    "agent_diagnostics",
    "git_diagnostics",
    "model_diagnostics",
    "name_diagnostics",
]

#: Longest scenario name. Sandboxes, report and transcript directories are named
#: after it (plus suffixes such as ``-trial-12``), and a path component may have
#: at most 255 bytes on common file systems.
MAX_SCENARIO_NAME = 128


def _at(scenario: Scenario, pointer: str) -> dict[str, Any]:
    location = None
    if scenario.text:
        try:
            location = location_of(scenario.text, pointer)
        except Exception:  # noqa: BLE001 - a position is a nicety; never fail a gate over it
            location = None
    return {"source": scenario.source, "pointer": pointer, "location": location}


def name_diagnostics(scenarios: Sequence[Scenario]) -> list[Diagnostic]:
    """``scenario-name-too-long`` for every name longer than :data:`MAX_SCENARIO_NAME`."""
    return [
        error(
            "scenario-name-too-long",
            f"scenario name is {len(s.name)} characters long; at most {MAX_SCENARIO_NAME} "
            "are allowed, because the trial directories are named after it",
            expected=f"a name of at most {MAX_SCENARIO_NAME} characters",
            next="shorten the name (the description field can hold the details)",
            **_at(s, "/name"),
        )
        for s in scenarios
        if len(s.name) > MAX_SCENARIO_NAME
    ]


def agent_diagnostics(
    scenarios: Sequence[Scenario], native: NativeOutputs, host: str
) -> list[Diagnostic]:
    """``unknown-scenario-agent`` for a ``task.agent`` no native output or host defines."""
    defined = set(native.agent_ids)
    known_host = native_host(host)
    builtin = known_host.builtin_agents if known_host is not None else frozenset()
    known = ", ".join(sorted(defined)) or "(none)"
    problems = []
    for scenario in scenarios:
        agent = scenario.document.task.agent
        if agent is None or agent in defined or agent in builtin:
            continue
        problems.append(
            error(
                "unknown-scenario-agent",
                f'scenario "{scenario.name}" names agent "{agent}", which no native output '
                f"of the {host} build defines",
                expected=f"an agent of the build ({known}) or one {host} provides "
                f"({', '.join(sorted(builtin)) or 'none'})",
                next="fix task.agent, or add the agent to the harness and rebuild it "
                "(native outputs are listed in the .atlante/*-native.json manifest)",
                **_at(scenario, "/task/agent"),
            )
        )
    return problems


def git_diagnostics() -> list[Diagnostic]:
    """``git-unavailable`` when ``git`` is not on the ``PATH`` sandboxes use."""
    path = git_env().get("PATH")
    if shutil.which("git", path=path):
        return []
    return [
        error(
            "git-unavailable",
            "git was not found on PATH; every trial's sandbox baseline needs it",
            cause=f"PATH={path or ''}",
            next="install git (e.g. apt-get install git) or add its directory to PATH",
        )
    ]


def model_diagnostics(host: str, model: str | None, dialect: str | None) -> list[Diagnostic]:
    """OpenCode without ``eval.model``: a warning (V1 or version unknown), an error for V2.

    An omitted model uses the host's default: V1 picks one for the signed-in
    provider, but an isolated V2 sandbox has no default model to fall back to.
    """
    if host != "opencode" or model is not None:
        return []
    if dialect == "v2":
        return [
            error(
                "eval-model-required",
                "eval.model is not set, and OpenCode V2 runs each trial standalone, "
                "without a default model to fall back to",
                pointer="/eval/model",
                expected='a provider/model id such as "anthropic/claude-sonnet-4-5"',
                next='set "model" in the eval section of atlante.jsonc',
            )
        ]
    return [
        warning(
            "eval-model-unset",
            "eval.model is not set: OpenCode uses its default model"
            + (
                " (V1 picks one for the signed-in provider, which may change between runs)"
                if dialect == "v1"
                else "; OpenCode V2 has no default, so a V2 host will refuse "
                "(validate --probe checks the version)"
            ),
            pointer="/eval/model",
            next='set "model" in the eval section of atlante.jsonc to make runs reproducible',
        )
    ]
