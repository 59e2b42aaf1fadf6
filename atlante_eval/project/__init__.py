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

from .behaviour import (
    MaxToolCallsCheck,
    MaxTurnsCheck,
    SkillUsedCheck,
    SubagentUsedCheck,
    ToolNotUsedCheck,
    ToolUsedCheck,
    TranscriptContainsCheck,
)
from .config import find_config
from .fingerprint import definition_digest, plan_digest, scenario_fingerprint
from .integrity import ProjectWatch, modified_cause, watch_run_inputs
from .native import NativeOutputs
from .plan import Plan, PlannedTrial, budget_skips, make_plan, parse_trials, resolve_budget
from .preflight import model_diagnostics
from .scenarios import (
    SCENARIO_NAME_PATTERN,
    SETUP_TIMEOUT_MS,
    AnyCheck,
    CommandCheck,
    DiffAllowlistCheck,
    FileAbsentCheck,
    FileContainsCheck,
    FileExistsCheck,
    FileUnchangedCheck,
    Scenario,
)
from .suite import Suite, load_suite, pack_setup_warnings
from .validation import BEHAVIOUR_CHECK_TAGS, location_of

__all__ = [
    "BEHAVIOUR_CHECK_TAGS",
    "SCENARIO_NAME_PATTERN",
    "SETUP_TIMEOUT_MS",
    "AnyCheck",
    "CommandCheck",
    "DiffAllowlistCheck",
    "FileAbsentCheck",
    "FileContainsCheck",
    "FileExistsCheck",
    "FileUnchangedCheck",
    "MaxToolCallsCheck",
    "MaxTurnsCheck",
    "NativeOutputs",
    "Plan",
    "PlannedTrial",
    "ProjectWatch",
    "Scenario",
    "SkillUsedCheck",
    "SubagentUsedCheck",
    "Suite",
    "ToolNotUsedCheck",
    "ToolUsedCheck",
    "TranscriptContainsCheck",
    "budget_skips",
    "definition_digest",
    "find_config",
    "load_suite",
    "location_of",
    "make_plan",
    "model_diagnostics",
    "modified_cause",
    "pack_setup_warnings",
    "parse_trials",
    "plan_digest",
    "resolve_budget",
    "scenario_fingerprint",
    "watch_run_inputs",
]
