"""Behaviour check models: what the trial's transcript must show (an atlante-eval extension).

These checks read the host-neutral transcript (docs/transcripts.md), not the
sandbox, so one document grades Claude Code and OpenCode alike. Only scenario
documents that declare :data:`~atlante_eval.choices.EXTENDED_SCENARIO_SCHEMA_URI`
may use them; a v0.1 document stays exactly as strict as the reference.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ..choices import ToolKind
from .validation import CheckModel, NonEmptyStr, Regex, check_regex

__all__ = [
    "BehaviourCheck",
    "MaxToolCallsCheck",
    "MaxTurnsCheck",
    "SkillUsedCheck",
    "SubagentUsedCheck",
    "ToolNotUsedCheck",
    "ToolUsedCheck",
    "TranscriptContainsCheck",
]

Count = Annotated[int, Field(ge=0)]


class _Counted(CheckModel):
    """``min`` / ``max`` bounds on how often something happened (default: at least once)."""

    min: Count = 1
    """Fewest matching entries that pass (default 1)."""
    max: Count | None = None
    """Most matching entries that pass (default: no limit)."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max is not None and self.min > self.max:
            raise ValueError(f'"min" ({self.min}) must not be greater than "max" ({self.max})')
        return self


class SkillUsedCheck(_Counted):
    """Pass when the agent loaded the named skill between ``min`` and ``max`` times."""

    type: Literal["skill-used"]
    """Check type."""
    skill: NonEmptyStr
    """The skill's name, as the host's skill tool names it."""


class SubagentUsedCheck(_Counted):
    """Pass when the agent delegated to the named subagent between ``min`` and ``max`` times."""

    type: Literal["subagent-used"]
    """Check type."""
    agent: NonEmptyStr
    """The subagent's type or name."""


class _ToolSelector(CheckModel):
    """Which tool calls a check counts: by host-native name or host-neutral kind."""

    tool: NonEmptyStr | None = None
    """A host-native tool name (``Bash``, ``bash``, ``mcp__x__y``), compared case-insensitively."""
    kind: ToolKind | None = None
    """A host-neutral kind: shell, read, write, search, skill, subagent or other."""
    input_matches: Regex | None = None
    """Regular expression searched in the call's input, written as JSON."""

    @model_validator(mode="after")
    def _one_selector(self) -> Self:
        if (self.tool is None) == (self.kind is None):
            raise ValueError('set exactly one of "tool" (a host-native name) or "kind"')
        return self

    def patterns(self) -> list[tuple[str, str]]:
        """``inputMatches``, when set."""
        return [] if self.input_matches is None else [("inputMatches", self.input_matches)]


class ToolUsedCheck(_ToolSelector, _Counted):
    """Pass when between ``min`` and ``max`` matching tool calls were made."""

    type: Literal["tool-used"]
    """Check type."""


class ToolNotUsedCheck(_ToolSelector):
    """Pass when no matching tool call was made."""

    type: Literal["tool-not-used"]
    """Check type."""


class MaxToolCallsCheck(CheckModel):
    """Pass when the trial made at most ``max`` tool calls (subagents' calls included)."""

    type: Literal["max-tool-calls"]
    """Check type."""
    max: Count
    """Most tool calls that pass."""


class MaxTurnsCheck(CheckModel):
    """Pass when the session took at most ``max`` turns, as the host counted them."""

    type: Literal["max-turns"]
    """Check type."""
    max: Annotated[int, Field(ge=1)]
    """Most turns that pass."""


class TranscriptContainsCheck(CheckModel):
    """Pass when the assistant's text contains a literal string or matches a regular expression."""

    type: Literal["transcript-contains"]
    """Check type."""
    regex: bool = False
    """Treat ``pattern`` as a regular expression (Python ``re``)."""
    pattern: NonEmptyStr
    """Literal text, or a regular expression when ``regex`` is true."""

    @field_validator("pattern")
    @classmethod
    def _compile_when_regex(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("regex") is True:
            check_regex(value)
        return value

    def patterns(self) -> list[tuple[str, str]]:
        """``pattern``, when ``regex`` is true."""
        return [("pattern", self.pattern)] if self.regex else []


#: Every behaviour check model.
BehaviourCheck = (
    SkillUsedCheck
    | SubagentUsedCheck
    | ToolUsedCheck
    | ToolNotUsedCheck
    | MaxToolCallsCheck
    | MaxTurnsCheck
    | TranscriptContainsCheck
)
