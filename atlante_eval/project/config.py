"""Find and load the project's ``atlante.jsonc`` / ``atlante.json`` and its eval section.

Only what eval needs is validated: ``$schema``, ``hosts``, ``extends`` and the
``eval`` section (strictly). The rest of the document (agents, skills, values,
options, ...) belongs to ``atlante build`` and is left alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .._util.endpoints import EndpointError, parse_endpoint
from .._util.jsondoc import DocumentParseError, DocumentReadError, parse_document, read_document
from ..choices import GatewayMode, HostName, IsolationMode
from ..diagnostics import ATLANTE_ABOUT, Diagnostic, DiagnosticError, Location, error
from ..history.location import parse_history_url
from .pins import pin_error
from .scenarios import MAX_TIMEOUT_MS
from .validation import NonEmptyStr, StrictModel, location_of, validation_diagnostics
from .variants import VariantConfig, duplicate_arm_problems

__all__ = [
    "CONFIG_FILENAMES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT_MS",
    "DEFAULT_TRIALS",
    "MAX_TRIALS",
    "SCHEMA_URIS",
    "AlertsConfig",
    "Budget",
    "EvalConfig",
    "HostName",
    "IsolationMode",
    "LimitsConfig",
    "NetworkConfig",
    "Project",
    "ProjectDocument",
    "Unlimited",
    "find_config",
    "load_project",
]

#: The configuration format versions this version reads.
ConfigVersion = Literal["0.1", "0.2"]
#: Document schema URIs and their versions.
SCHEMA_URIS: dict[str, ConfigVersion] = {
    "https://atlante.sh/schema/v0.1/schema.json": "0.1",
    "https://atlante.sh/schema/v0.2/schema.json": "0.2",
}
#: Configuration file names, in no order of preference (both present is an error).
CONFIG_FILENAMES = ("atlante.jsonc", "atlante.json")

#: Trials per scenario when the budget does not say.
DEFAULT_TRIALS = 3
#: Most trials per scenario a budget (or ``--trials``) may ask for.
MAX_TRIALS = 50
#: Host-session timeout per trial when the budget does not say (ten minutes).
DEFAULT_TIMEOUT_MS = 600_000
#: Host sessions per run when the budget does not say.
DEFAULT_MAX_SESSIONS = 15
#: Per-trial token threshold when the budget does not say.
DEFAULT_MAX_TOKENS = 400_000
_CONFIG_DOCS = "see docs/configuration.md"


def _default_hosts() -> list[HostName]:
    return ["opencode"]


def _version(info: ValidationInfo) -> str:
    context = info.context if isinstance(info.context, dict) else {}
    return str(context.get("schema_version", "0.2"))


class Budget(StrictModel):
    """The run budget; absent fields take the defaults."""

    trials: Annotated[int, Field(ge=1, le=MAX_TRIALS)] = DEFAULT_TRIALS
    """Trials per scenario (1-50)."""
    timeout_ms: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS)] = DEFAULT_TIMEOUT_MS
    """Host-session wall-clock limit per trial, in milliseconds (at most one hour)."""
    max_sessions: Annotated[int, Field(ge=1)] = DEFAULT_MAX_SESSIONS
    """Host sessions per run; later trials become ``skipped-budget``."""
    max_tokens: Annotated[int, Field(ge=1)] = DEFAULT_MAX_TOKENS
    """Token threshold per trial, enforced from the host's cumulative usage events."""


class NetworkConfig(StrictModel):
    """``eval.network``: what a trial under ``os`` isolation may reach besides the model."""

    allow: list[NonEmptyStr] = Field(default_factory=list)
    """Extra ``host:port`` destinations (or ``host`` for port 443, or URLs) the host
    session and setup may reach."""

    @field_validator("allow")
    @classmethod
    def _endpoints(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                parse_endpoint(entry)
            except EndpointError as exc:
                raise ValueError(str(exc)) from None
        return value


class AlertsConfig(StrictModel):
    """``eval.alerts``: who hears, after a run, that a scenario regressed against its baseline."""

    webhook: NonEmptyStr | None = None
    """URL the alert is POSTed to as JSON; ``${NAME}`` reads it from that environment
    variable (keep webhook secrets out of the configuration)."""
    baseline: NonEmptyStr = "default"
    """The blessed baseline (``history bless --name``) a run is compared with."""


Unlimited = Literal["unlimited"]
"""The value that turns one resource limit off (its default included)."""
#: Most megabytes ``memoryMb`` and ``tmpMb`` accept (16 TiB).
_MAX_MB = 16 * 1024 * 1024


def _limit(low: float, high: float, *, integer: bool = True) -> BeforeValidator:
    """A validator of one limit: a number from ``low`` to ``high``, or ``"unlimited"``."""
    kind = "an integer" if integer else "a number"

    def check(value: object) -> object:
        if value is None or value == "unlimited":
            return value
        wanted = int if integer else int | float
        if isinstance(value, wanted) and not isinstance(value, bool) and low <= value <= high:
            return value
        got = json.dumps(value) if isinstance(value, str | int | float | bool) else "another type"
        raise ValueError(f'must be {kind} from {low:,} to {high:,} or "unlimited" (got {got})')

    return BeforeValidator(check)


class LimitsConfig(StrictModel):
    """``eval.limits`` (and ``run --limit``): per-trial resource limits; absent keys default.

    Enforced for the host session, setup and command checks with control groups,
    and (``tmpMb``) sized private tmpfs mounts under ``os`` isolation; the defaults
    are in docs/isolation.md.
    """

    memory_mb: Annotated[int | Unlimited | None, _limit(16, _MAX_MB)] = None
    """Memory of all the trial's processes together (MiB), tmpfs pages included."""
    pids: Annotated[int | Unlimited | None, _limit(16, 4_194_304)] = None
    """Processes and threads the trial may have at once."""
    cpus: Annotated[float | Unlimited | None, _limit(0.01, 1024, integer=False)] = None
    """CPUs' worth of time per scheduling period (``0.5`` is half of one CPU)."""
    tmp_mb: Annotated[int | Unlimited | None, _limit(1, _MAX_MB)] = None
    """Size of each private tmpfs (``/tmp``, ``/var``, ``/run``, ``/dev/shm``) under ``os``."""


class EvalConfig(StrictModel):
    """The project's ``eval`` section."""

    host: HostName
    """The host runner; v0.1 documents admit only ``opencode``."""
    scenarios: NonEmptyStr | None = None
    """Glob of scenario documents, relative to the project root."""
    include: Annotated[list[NonEmptyStr], Field(min_length=1)] | None = None
    """Package or package-preset locators whose pack suites may run."""
    model: NonEmptyStr | None = None
    """Model passed to the host; omitted uses the host default."""
    budget: Budget = Field(default_factory=Budget)
    """Run budget."""
    isolation: IsolationMode = "none"
    """How trials are contained (additive; ``run --isolation`` overrides it)."""
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    """Network allow list under ``os`` isolation (additive)."""
    gateway: GatewayMode = "on"
    """Whether each trial's model calls go through the engine's gateway, which meters
    them from the provider's responses (additive; ``run --gateway`` overrides it;
    docs/gateway.md)."""
    history: NonEmptyStr | Literal[False] | None = None
    """The history store: a SQLite path (relative to the project root),
    ``postgresql://…``, or ``false`` for none (additive; default
    ``.atlante/eval/history.sqlite``; docs/history.md)."""
    alerts: AlertsConfig | None = None
    """Alerts after a run (additive; docs/history.md)."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    """Per-trial resource limits (additive; ``run --limit`` overrides each key)."""
    host_version: NonEmptyStr | None = None
    """The exact host CLI version to run, e.g. ``2.1.332``: installed into and run from
    the managed host cache (additive; ``--host-version`` overrides it; docs/hosts.md)."""
    variants: Annotated[list[VariantConfig], Field(min_length=1)] | None = None
    """Arms run side by side in one run and compared with the control arm (additive;
    ``run --variant``/``--variants`` select them; docs/variants.md)."""

    @field_validator("variants")
    @classmethod
    def _arms(cls, value: list[VariantConfig] | None) -> list[VariantConfig] | None:
        problems = duplicate_arm_problems(value or [])
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("history")
    @classmethod
    def _history_url(cls, value: str | bool | None) -> str | bool | None:
        if isinstance(value, str):
            try:
                parse_history_url(value, base=Path("/"))
            except DiagnosticError as exc:
                raise ValueError(exc.diagnostics[0].message) from None
        return value

    @field_validator("host")
    @classmethod
    def _host_for_version(cls, value: str, info: ValidationInfo) -> str:
        if _version(info) == "0.1" and value != "opencode":
            raise ValueError(
                'v0.1 documents admit only "opencode"; use the v0.2 schema for "claude-code"'
            )
        return value

    @field_validator("include")
    @classmethod
    def _unique_include(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("eval.include must not contain duplicate locators")
        return value

    @model_validator(mode="after")
    def _scenarios_or_include(self) -> EvalConfig:
        if self.scenarios is None and self.include is None:
            raise ValueError('the eval section needs "scenarios", "include", or both')
        return self


class ProjectDocument(BaseModel):
    """The parts of the project document eval reads; other keys are the build's."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, populate_by_name=True)

    schema_uri: str = Field(alias="$schema")
    """Document schema URI (v0.1 or v0.2)."""
    hosts: Annotated[list[HostName], Field(min_length=1)] = Field(default_factory=_default_hosts)
    """Host materialization targets."""
    extends: NonEmptyStr | Annotated[list[NonEmptyStr], Field(min_length=1)] | None = None
    """Preset locator or ordered preset layers."""
    eval: EvalConfig | None = None
    """The eval section."""

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("hosts must not contain duplicates")
        if _version(info) == "0.1" and any(host != "opencode" for host in value):
            raise ValueError('v0.1 documents admit only "opencode" in hosts')
        return value

    @property
    def extends_list(self) -> tuple[str, ...]:
        """``extends`` as a tuple (empty when absent)."""
        if self.extends is None:
            return ()
        return (self.extends,) if isinstance(self.extends, str) else tuple(self.extends)


@dataclass(frozen=True, slots=True)
class Project:
    """A loaded project: its root, configuration file and validated document."""

    root: Path
    config_path: Path
    schema_version: ConfigVersion
    document: ProjectDocument
    text: str

    @property
    def source(self) -> str:
        """The configuration file name, as shown in diagnostics."""
        return self.config_path.name

    @property
    def eval(self) -> EvalConfig:
        """The eval section (load_project guarantees it exists)."""
        assert self.document.eval is not None
        return self.document.eval


def find_config(path: Path | str | None = None) -> Path:
    """Return the configuration file for ``path`` (a directory or a file; default cwd).

    Raises:
        DiagnosticError: no configuration (``eval-not-configured``) or both file
            names present (``ambiguous-config``).
    """
    target = Path.cwd() if path is None else Path(path)
    target = target.absolute()
    if target.is_dir():
        found = [target / name for name in CONFIG_FILENAMES if (target / name).is_file()]
        if len(found) == 2:
            raise DiagnosticError(
                [
                    error(
                        "ambiguous-config",
                        f"both atlante.jsonc and atlante.json exist in {target}; "
                        "refusing to choose",
                        next="remove one of them, or pass the file to use explicitly",
                    )
                ]
            )
        if found:
            return found[0]
        raise DiagnosticError(
            [
                error(
                    "eval-not-configured",
                    f"no Atlante configuration found in {target}",
                    expected="atlante.jsonc or atlante.json",
                    next="pass the project directory, or create one with `atlante init` "
                    f"({ATLANTE_ABOUT})",
                )
            ]
        )
    if target.is_file():
        return target
    raise DiagnosticError(
        [
            error(
                "eval-not-configured",
                f"no Atlante configuration found at {target}",
                expected="a project directory, atlante.jsonc or atlante.json",
                next=f"check the path, or create a project with `atlante init` ({ATLANTE_ABOUT})",
            )
        ]
    )


def load_project(path: Path | str | None = None) -> Project:
    """Load and validate the project at ``path`` (directory or config file; default cwd).

    Raises:
        DiagnosticError: every problem found, with exit code 2.
    """
    config_path = find_config(path)
    source = config_path.name
    text, value = _read_config(config_path, source)
    version = _schema_version(value, text, source)
    document = _validate_config(value, text, version, source)
    return Project(
        root=config_path.parent,
        config_path=config_path,
        schema_version=version,
        document=document,
        text=text,
    )


def _fail(code: str, message: str, **fields: object) -> DiagnosticError:
    """The one-diagnostic error that stops loading the configuration."""
    return DiagnosticError([error(code, message, **fields)])


def _read_config(config_path: Path, source: str) -> tuple[str, dict[str, Any]]:
    """Read the configuration file: its text and the JSON object it holds.

    Raises:
        DiagnosticError: ``config-unreadable``, ``malformed-jsonc``, or
            ``invalid-document`` when it is not an object.
    """
    jsonc = not config_path.name.endswith(".json")
    try:
        text = read_document(config_path, follow_symlinks=True)
    except DocumentReadError as exc:
        raise _fail(
            "config-unreadable",
            f"the configuration {exc}",
            source=source,
            next="save the configuration as a UTF-8 text file of at most 1 MiB",
        ) from None
    try:
        value = parse_document(text, jsonc=jsonc)
    except DocumentParseError as exc:
        raise _fail(
            "malformed-jsonc",
            f"malformed {'JSONC' if jsonc else 'JSON'}: {exc.message}",
            source=source,
            location=Location(line=exc.line, column=exc.column),
            next="fix the syntax error at the position shown",
        ) from None
    if not isinstance(value, dict):
        raise _fail(
            "invalid-document",
            f"the configuration must be a JSON object, not {_json_kind(value)}",
            source=source,
            location=Location(line=1, column=1),
            next=f"wrap the configuration in {{...}}; {_CONFIG_DOCS}",
        )
    return text, value


def _schema_version(value: dict[str, Any], text: str, source: str) -> ConfigVersion:
    """The configuration format version its ``$schema`` declares.

    Raises:
        DiagnosticError: ``unsupported-schema`` when it declares none this version reads.
    """
    declared = value.get("$schema")
    version = SCHEMA_URIS.get(declared) if isinstance(declared, str) else None
    if version is None:
        raise _fail(
            "unsupported-schema",
            f"unsupported configuration $schema {declared!r}"
            if declared is not None
            else "the configuration has no $schema",
            source=source,
            pointer="/$schema",
            location=location_of(text, "/$schema"),
            expected=" or ".join(SCHEMA_URIS),
            next='set "$schema" to one of the expected URIs',
        )
    return version


def _validate_config(
    value: dict[str, Any], text: str, version: ConfigVersion, source: str
) -> ProjectDocument:
    """Validate the document, then require an eval section whose host is materialized.

    Raises:
        DiagnosticError: ``invalid-document`` (one per problem), ``eval-not-configured``
            or ``eval-host-not-materialized``.
    """
    try:
        document = ProjectDocument.model_validate(value, context={"schema_version": version})
    except ValidationError as exc:
        raise DiagnosticError(
            validation_diagnostics(
                exc,
                code="invalid-document",
                source=source,
                text=text,
                value=value,
                next_step=f"fix the value at the position shown; {_CONFIG_DOCS}",
            )
        ) from None
    if document.eval is None:
        raise _fail(
            "eval-not-configured",
            "the configuration has no eval section",
            source=source,
            next='add an "eval" section with a host and a scenarios glob '
            "(see docs/configuration.md)",
        )
    if document.eval.host not in document.hosts:
        raise _fail(
            "eval-host-not-materialized",
            f'eval.host "{document.eval.host}" is not one of the document hosts {document.hosts}',
            source=source,
            pointer="/eval/host",
            location=location_of(text, "/eval/host"),
            expected=" or ".join(f'"{host}"' for host in document.hosts),
            next=f'add "{document.eval.host}" to "hosts", run `atlante build` '
            f"({ATLANTE_ABOUT}) and try again",
        )
    pinned = document.eval.host_version
    problem = None if pinned is None else _pin_error(document.eval.host, pinned, source, text)
    if problem is not None:
        raise DiagnosticError([problem])
    arm_pins = [
        _pin_error(document.eval.host, arm.host_version, source, text, f"/eval/variants/{i}")
        for i, arm in enumerate(document.eval.variants or [])
        if arm.host_version is not None
    ]
    if any(arm_pins):
        raise DiagnosticError([p for p in arm_pins if p is not None])
    return document


def _pin_error(
    host: str, version: str, source: str, text: str, at: str = "/eval"
) -> Diagnostic | None:
    """``invalid-host-version`` for an ``eval.hostVersion`` (or an arm's ``hostVersion``,
    ``at`` its pointer) the host cannot be pinned at."""
    pointer = f"{at}/hostVersion"
    return pin_error(
        host,
        version,
        what=pointer.lstrip("/").replace("/", "."),
        source=source,
        pointer=pointer,
        location=location_of(text, pointer),
    )


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
