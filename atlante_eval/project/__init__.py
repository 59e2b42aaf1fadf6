"""The project and its scenarios: configuration, discovery, packs, native outputs, the plan.

Everything here reads the user's files and validates them before any trial:
:mod:`.config` (``atlante.jsonc``'s ``eval`` section), :mod:`.scenarios` and
:mod:`.behaviour` (scenario documents), :mod:`.discovery` and :mod:`.packs`
(finding them), :mod:`.validation` (diagnostics from validation errors),
:mod:`.native` (verified native outputs), :mod:`.preflight` (gates before a run),
:mod:`.suite` (all of it loaded together), :mod:`.plan` (which trials run),
:mod:`.fingerprint` and :mod:`.integrity` (what the trials' inputs were, and
that they did not change). :mod:`.schemas` (JSON Schemas) is imported by path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._util.lazy import export_homes, load_export

#: Every re-exported name, by the module that defines it (loaded on first use).
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".behaviour": (
        "MaxToolCallsCheck",
        "MaxTurnsCheck",
        "SkillUsedCheck",
        "SubagentUsedCheck",
        "ToolNotUsedCheck",
        "ToolUsedCheck",
        "TranscriptContainsCheck",
    ),
    ".config": ("find_config",),
    ".fingerprint": ("definition_digest", "plan_digest", "scenario_fingerprint"),
    ".integrity": ("ProjectWatch", "modified_cause", "watch_run_inputs"),
    ".native": ("NativeOutputs",),
    ".plan": (
        "Plan",
        "PlannedTrial",
        "budget_skips",
        "make_plan",
        "parse_trials",
        "resolve_budget",
    ),
    ".preflight": ("model_diagnostics",),
    ".scenarios": (
        "SCENARIO_NAME_PATTERN",
        "SETUP_TIMEOUT_MS",
        "AnyCheck",
        "CommandCheck",
        "DiffAllowlistCheck",
        "FileAbsentCheck",
        "FileContainsCheck",
        "FileExistsCheck",
        "FileUnchangedCheck",
        "Scenario",
    ),
    ".suite": ("Suite", "load_suite", "pack_setup_warnings"),
    ".validation": ("BEHAVIOUR_CHECK_TAGS", "location_of"),
}

if TYPE_CHECKING:
    from .behaviour import MaxToolCallsCheck as MaxToolCallsCheck
    from .behaviour import MaxTurnsCheck as MaxTurnsCheck
    from .behaviour import SkillUsedCheck as SkillUsedCheck
    from .behaviour import SubagentUsedCheck as SubagentUsedCheck
    from .behaviour import ToolNotUsedCheck as ToolNotUsedCheck
    from .behaviour import ToolUsedCheck as ToolUsedCheck
    from .behaviour import TranscriptContainsCheck as TranscriptContainsCheck
    from .config import find_config as find_config
    from .fingerprint import definition_digest as definition_digest
    from .fingerprint import plan_digest as plan_digest
    from .fingerprint import scenario_fingerprint as scenario_fingerprint
    from .integrity import ProjectWatch as ProjectWatch
    from .integrity import modified_cause as modified_cause
    from .integrity import watch_run_inputs as watch_run_inputs
    from .native import NativeOutputs as NativeOutputs
    from .plan import Plan as Plan
    from .plan import PlannedTrial as PlannedTrial
    from .plan import budget_skips as budget_skips
    from .plan import make_plan as make_plan
    from .plan import parse_trials as parse_trials
    from .plan import resolve_budget as resolve_budget
    from .preflight import model_diagnostics as model_diagnostics
    from .scenarios import SCENARIO_NAME_PATTERN as SCENARIO_NAME_PATTERN
    from .scenarios import SETUP_TIMEOUT_MS as SETUP_TIMEOUT_MS
    from .scenarios import AnyCheck as AnyCheck
    from .scenarios import CommandCheck as CommandCheck
    from .scenarios import DiffAllowlistCheck as DiffAllowlistCheck
    from .scenarios import FileAbsentCheck as FileAbsentCheck
    from .scenarios import FileContainsCheck as FileContainsCheck
    from .scenarios import FileExistsCheck as FileExistsCheck
    from .scenarios import FileUnchangedCheck as FileUnchangedCheck
    from .scenarios import Scenario as Scenario
    from .suite import Suite as Suite
    from .suite import load_suite as load_suite
    from .suite import pack_setup_warnings as pack_setup_warnings
    from .validation import BEHAVIOUR_CHECK_TAGS as BEHAVIOUR_CHECK_TAGS
    from .validation import location_of as location_of

_HOMES = export_homes(_EXPORTS)

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    return load_export(__name__, _HOMES, name)
