"""Scenario documents (schema v0.1 and its extension): the models, and a discovered scenario.

A scenario document names a task (fixture, optional setup, agent, prompt) and the
deterministic checks that grade one trial of it. A document declaring the
reference's v0.1 schema (:class:`ScenarioDocument`) may use the six core checks
only; one declaring atlante-eval's own schema (:class:`ExtendedScenarioDocument`)
may also use the behaviour checks of :mod:`atlante_eval.project.behaviour`.
Every level is strict: unknown keys, wrong types and unsafe paths are validation
errors, and every regular expression is compiled here, so nothing invalid reaches
a host run.

Regular expressions use Python's :mod:`re` dialect (see docs/scenarios.md for what
differs from the JavaScript dialect of the reference implementation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from .._util.patterns import pattern_problem
from ..choices import EXTENDED_SCENARIO_SCHEMA_URI, SCENARIO_SCHEMA_URI, CheckType
from .behaviour import (
    BehaviourCheck,
    MaxToolCallsCheck,
    MaxTurnsCheck,
    SkillUsedCheck,
    SubagentUsedCheck,
    ToolNotUsedCheck,
    ToolUsedCheck,
    TranscriptContainsCheck,
)
from .validation import CheckModel, NonEmptyStr, Regex, SandboxPath, StrictModel

__all__ = [
    "CHECK_TIMEOUT_DEFAULT_MS",
    "EXTENDED_SCENARIO_SCHEMA_URI",
    "MAX_TIMEOUT_MS",
    "SCENARIO_MODELS",
    "SCENARIO_NAME_PATTERN",
    "SCENARIO_SCHEMA_URI",
    "SETUP_TIMEOUT_MS",
    "AnyCheck",
    "AnyScenarioDocument",
    "BehaviourCheck",
    "Check",
    "CheckType",
    "CommandCheck",
    "DiffAllowlistCheck",
    "ExtendedScenarioDocument",
    "FileAbsentCheck",
    "FileContainsCheck",
    "FileExistsCheck",
    "FileUnchangedCheck",
    "MaxToolCallsCheck",
    "MaxTurnsCheck",
    "Origin",
    "Scenario",
    "ScenarioBudget",
    "ScenarioDocument",
    "SkillUsedCheck",
    "SubagentUsedCheck",
    "Task",
    "ToolNotUsedCheck",
    "ToolUsedCheck",
    "TranscriptContainsCheck",
]

#: Upper bound of every timeout a user can write (one hour).
MAX_TIMEOUT_MS = 3_600_000
#: Timeout of a command check that does not set ``timeoutMs``.
CHECK_TIMEOUT_DEFAULT_MS = 120_000
#: Fixed timeout of a scenario's ``task.setup`` command.
SETUP_TIMEOUT_MS = 300_000
#: Scenario names are slugs.
SCENARIO_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"

TimeoutMs = Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS)]


class CommandCheck(CheckModel):
    """Run an argv in the sandbox root (never through a shell) and test its exit and output."""

    type: Literal["command"]
    """Check type."""
    run: Annotated[list[NonEmptyStr], Field(min_length=1)]
    """Program and arguments."""
    expect_exit: int = 0
    """Exit status that passes."""
    output_matches: Regex | None = None
    """Regular expression searched in combined stdout and stderr."""
    timeout_ms: TimeoutMs = CHECK_TIMEOUT_DEFAULT_MS
    """Timeout of the command; on expiry the check fails with ``timedOut: true``."""

    def patterns(self) -> list[tuple[str, str]]:
        """``outputMatches``, when set."""
        return [] if self.output_matches is None else [("outputMatches", self.output_matches)]


class FileExistsCheck(CheckModel):
    """Pass when a non-symlink path exists (file or directory)."""

    type: Literal["file-exists"]
    """Check type."""
    path: SandboxPath
    """Sandbox-relative path."""


class FileAbsentCheck(CheckModel):
    """Pass when no non-symlink path exists."""

    type: Literal["file-absent"]
    """Check type."""
    path: SandboxPath
    """Sandbox-relative path."""


class FileUnchangedCheck(CheckModel):
    """Pass when the regular file's SHA-256 equals its pre-trial value (missing = null)."""

    type: Literal["file-unchanged"]
    """Check type."""
    path: SandboxPath
    """Sandbox-relative path."""


class FileContainsCheck(CheckModel):
    """Pass when a file contains a literal string, or matches a regular expression."""

    type: Literal["file-contains"]
    """Check type."""
    path: SandboxPath
    """Sandbox-relative path."""
    regex: bool = False
    """Treat ``pattern`` as a regular expression (Python ``re`` syntax, time-bounded)."""
    pattern: NonEmptyStr
    """Literal text, or a regular expression when ``regex`` is true."""

    @field_validator("pattern")
    @classmethod
    def _compile_when_regex(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("regex") is True:
            problem = pattern_problem(value)
            if problem is not None:
                raise ValueError(
                    f"pattern must be a valid regular expression when regex is true ({problem})"
                )
        return value

    def patterns(self) -> list[tuple[str, str]]:
        """``pattern``, when ``regex`` is true."""
        return [("pattern", self.pattern)] if self.regex else []


class DiffAllowlistCheck(CheckModel):
    """Pass when every path changed since the baseline is listed in ``allow``."""

    type: Literal["diff-allowlist"]
    """Check type."""
    allow: Annotated[list[SandboxPath], Field(min_length=1)]
    """Exact sandbox-relative paths the agent may change."""


Check = Annotated[
    CommandCheck
    | FileExistsCheck
    | FileAbsentCheck
    | FileUnchangedCheck
    | FileContainsCheck
    | DiffAllowlistCheck,
    Field(discriminator="type"),
]
"""One of the reference's six checks (all a v0.1 document may use)."""

AnyCheck = Annotated[
    CommandCheck
    | FileExistsCheck
    | FileAbsentCheck
    | FileUnchangedCheck
    | FileContainsCheck
    | DiffAllowlistCheck
    | BehaviourCheck,
    Field(discriminator="type"),
]
"""A core or behaviour check (what an extended document may use)."""


class Task(StrictModel):
    """The fixture, setup, agent and prompt that drive one trial."""

    fixture: SandboxPath
    """Directory copied as the sandbox root, relative to the project (or pack) root."""
    setup: list[NonEmptyStr] | None = None
    """argv run in the sandbox before the baseline snapshot (fixed 300 s timeout)."""
    agent: NonEmptyStr | None = None
    """Harness agent that drives the task; omitted uses the host default."""
    prompt: NonEmptyStr
    """The prompt sent to the agent."""


class ScenarioBudget(StrictModel):
    """Per-scenario budget override."""

    timeout_ms: TimeoutMs
    """Host-session timeout for this scenario's trials."""


class _ScenarioFields(StrictModel):
    """The fields every scenario document has, in document order."""

    schema_uri: str = Field(alias="$schema")
    """The schema URI the document declares."""
    version: Literal["0.1"]
    """Scenario document version."""
    name: Annotated[str, Field(pattern=SCENARIO_NAME_PATTERN)]
    """Slug (a-z, 0-9, hyphen), unique across the suite."""
    description: NonEmptyStr | None = None
    """Optional human-readable summary (copied into the report)."""
    task: Task
    """What one trial does."""
    budget: ScenarioBudget | None = None
    """Optional ``{timeoutMs}`` override."""


class ScenarioDocument(_ScenarioFields):
    """A scenario document, schema ``https://atlante.sh/schema/v0.1/eval-scenario.json``."""

    schema_uri: Literal["https://atlante.sh/schema/v0.1/eval-scenario.json"] = Field(
        alias="$schema"
    )
    """The exact v0.1 eval-scenario schema URI."""
    checks: Annotated[list[Check], Field(min_length=1)]
    """At least one deterministic check."""


class ExtendedScenarioDocument(_ScenarioFields):
    """A scenario document of atlante-eval's own schema: v0.1 plus the behaviour checks."""

    schema_uri: Literal["https://atlante.sh/schema/atlante-eval/v1/eval-scenario.json"] = Field(
        alias="$schema"
    )
    """The exact URI of atlante-eval's extended eval-scenario schema."""
    checks: Annotated[list[AnyCheck], Field(min_length=1)]
    """At least one check: a core check or a behaviour check over the transcript."""


#: A scenario document of either schema.
AnyScenarioDocument = ScenarioDocument | ExtendedScenarioDocument

#: The document model of each scenario schema URI.
SCENARIO_MODELS: dict[str, type[ScenarioDocument] | type[ExtendedScenarioDocument]] = {
    SCENARIO_SCHEMA_URI: ScenarioDocument,
    EXTENDED_SCENARIO_SCHEMA_URI: ExtendedScenarioDocument,
}


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a scenario came from: the project itself or an npm pack."""

    kind: Literal["project", "package"]
    root: Path
    package_name: str | None = None
    package_version: str | None = None
    locators: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``project`` or ``<name>@<version>``."""
        if self.kind == "project":
            return "project"
        return f"{self.package_name}@{self.package_version}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario document and where it was found."""

    document: AnyScenarioDocument
    source: str
    """Root-relative path of the document (``<pkg>@<version>/<path>`` for packs)."""
    path: Path
    """Absolute path of the document."""
    origin: Origin
    declared_host: str | None = field(default=None)
    """The host a pack suite declared, if any."""
    text: str = field(default="", repr=False)
    """The document's text, for fingerprints."""

    @property
    def name(self) -> str:
        """The scenario's name."""
        return self.document.name

    @property
    def fixture_path(self) -> Path:
        """The fixture directory, resolved against the origin root."""
        return self.origin.root / self.document.task.fixture
