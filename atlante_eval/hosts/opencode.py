"""The OpenCode host: V1 (``>=1.18.29 <2.0.0``) and V2 (``>=2.0.0 <3.0.0``) dialects.

Per run, :meth:`OpenCodeHost.probe` reads ``opencode --version``, picks the
dialect and checks for stored credentials. Per trial, :meth:`OpenCodeHost.prepare`
copies only the credentials into the trial's private data directory and authors a
fresh dialect-native configuration in the sandbox; :meth:`OpenCodeHost.run_session`
runs ``opencode run --format json`` with the prompt on stdin (positional prompts
with spaces are re-quoted by OpenCode) in an environment whose HOME, XDG
directories and temp directories belong to the trial alone.

Provider path: ``eval.model`` plus the host's stored authentication (``auth.json``).
A provider OpenCode does not know (a gateway, a local server) can be defined with
``--pass-env OPENCODE_CONFIG_CONTENT``; only provider and model keys are accepted
there, because OpenCode merges that variable over the sandbox configuration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .._util.endpoints import Endpoint
from ..diagnostics import DiagnosticError, error
from ..project.native import NATIVE_HOSTS
from .base import HostError, SessionUsage, StreamParser, TrialContext, secret_values
from .credentials import (
    CredentialsError,
    copy_private_file,
    copy_v2_database,
    opencode_data_dir,
    opencode_db_path,
    stored_secret_values,
)
from .isolation import session_env, trial_dirs
from .opencode_config import (
    ConfigError,
    Dialect,
    build_config,
    check_fixture_configs,
    check_inline_config,
    config_target,
    write_config,
)
from .opencode_routing import opencode_route, opencode_routed_config, opencode_routed_env
from .opencode_transcript import OpenCodeNormalizer
from .session import CliHost
from .streams import OpenCodeStream
from .versions import probe_version

__all__ = [
    "OPENCODE_DEFAULT_ENV",
    "OPENCODE_IGNORED_CHANGES",
    "OPENCODE_MODEL_ENDPOINTS",
    "OPENCODE_REFUSED_PASS_ENV",
    "OPENCODE_V1",
    "OPENCODE_V2",
    "OpenCodeHost",
]

#: Supported OpenCode versions with the V1 and the V2 dialect (declared with the host's
#: release in ``NATIVE_HOSTS``).
OPENCODE_V1, OPENCODE_V2 = NATIVE_HOSTS["opencode"].versions

#: The model APIs OpenCode reaches by default (its sessions may, under ``--isolation os``).
OPENCODE_MODEL_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("api.anthropic.com", 443),
    Endpoint("api.openai.com", 443),
    Endpoint("openrouter.ai", 443),
    Endpoint("generativelanguage.googleapis.com", 443),
)

#: Switches that keep a trial's OpenCode off the network except for model calls.
#: ``npm_config_registry`` sends OpenCode's background ``@opencode-ai/plugin`` install
#: (into each config directory) to a dead loopback port, where it fails harmlessly;
#: ``--pass-env npm_config_registry`` restores a registry for tasks that need one.
OPENCODE_DEFAULT_ENV: Mapping[str, str] = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": "1",
    "npm_config_registry": "http://127.0.0.1:9/",
}

#: ``--pass-env`` names refused for OpenCode: each would replace or drop the
#: generated configuration and its containment policy.
OPENCODE_REFUSED_PASS_ENV = frozenset(
    {"OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_PERMISSION",
     "OPENCODE_DISABLE_PROJECT_CONFIG"}
)  # fmt: skip

#: What OpenCode itself writes into a sandbox: its ``.opencode/.gitignore`` lists
#: exactly these (the plugin dependency install); diff-allowlist ignores them.
OPENCODE_IGNORED_CHANGES: Sequence[str] = (
    ".opencode/.gitignore",
    ".opencode/node_modules/**",
    ".opencode/package.json",
    ".opencode/package-lock.json",
    ".opencode/bun.lock",
)

_INSTALL_HINT = "install OpenCode (npm install -g opencode-ai) and make sure opencode is on PATH"
_UNAUTHENTICATED_NEXT = (
    "run `opencode auth login` (or `opencode` and sign in) once so that {where} exists, "
    "then re-run this command"
)


class OpenCodeHost(CliHost):
    """Runs trials on the OpenCode CLI."""

    name = "opencode"
    command = "opencode"
    ignored_changes: Sequence[str] = OPENCODE_IGNORED_CHANGES
    model_endpoints = OPENCODE_MODEL_ENDPOINTS
    #: Whether the generated configuration switches off work outside the task
    #: (the title model call, session snapshots; see docs/hosts.md).
    quiet_config: bool = True
    #: Host defaults of every session (see :data:`OPENCODE_DEFAULT_ENV`).
    default_env: Mapping[str, str] = OPENCODE_DEFAULT_ENV

    def __init__(self, binary: str = "opencode", *, env: Mapping[str, str] | None = None) -> None:
        """Create an unprobed host (``binary`` looked up on PATH; ``env`` for tests)."""
        super().__init__(binary, env=env)
        self._dialect: Dialect | None = None
        self._auth_json: Path | None = None
        self._database: Path | None = None

    @property
    def dialect(self) -> Dialect | None:
        """``v1`` or ``v2`` once probed."""
        return self._dialect

    @property
    def credentials_checked(self) -> str | None:
        """What the probe found about credentials, in words (``None`` before it ran)."""
        found = [str(p) for p in (self._auth_json, self._database) if p is not None]
        if not found:
            return None
        return f"stored credentials found in {' and '.join(found)} (not verified with the provider)"

    async def probe(self) -> None:
        """Probe the version (once per run) and the stored credentials.

        Raises:
            DiagnosticError: ``eval-host-unavailable``, ``eval-host-unsupported-version``
                or ``eval-host-unauthenticated`` (exit 3).
        """
        env = dict(self._parent_env())
        path, version, matched = await probe_version(
            self._binary,
            label=self.name,
            ranges=(OPENCODE_V1, OPENCODE_V2),
            install_hint=_INSTALL_HINT,
            env=env,
        )
        dialect: Dialect = "v1" if matched is OPENCODE_V1 else "v2"
        data = opencode_data_dir(env)
        auth_json = data / "auth.json"
        database = await opencode_db_path(path, env, data) if dialect == "v2" else None
        has_db = database is not None and database.is_file()
        if not auth_json.is_file() and not has_db:
            where = f"{auth_json} or {database}" if dialect == "v2" else str(auth_json)
            raise DiagnosticError(
                [
                    error(
                        "eval-host-unauthenticated",
                        f"opencode authentication not found at {where}",
                        expected="stored OpenCode credentials: "
                        + ("auth.json or the V2 database" if dialect == "v2" else "auth.json"),
                        next=_UNAUTHENTICATED_NEXT.format(where=auth_json),
                    )
                ]
            )
        self._path, self._version, self._dialect = path, str(version), dialect
        self._auth_json = auth_json if auth_json.is_file() else None
        self._database = database if has_db else None

    def _probed(self) -> tuple[str, Dialect]:
        if self._path is None or self._dialect is None:
            raise HostError("the opencode host was not probed before the trial")
        return self._path, self._dialect

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        """Refuse ``--pass-env`` names that would replace the sandbox configuration.

        Raises:
            HostError: the first refused name, and why.
        """
        refused = sorted(OPENCODE_REFUSED_PASS_ENV.intersection(pass_env))
        if refused:
            raise HostError(
                f"--pass-env {refused[0]} is refused for opencode: it would replace the "
                "generated sandbox configuration and its containment policy"
            )
        inline = self._parent_env().get("OPENCODE_CONFIG_CONTENT")
        if "OPENCODE_CONFIG_CONTENT" in pass_env and inline is not None:
            problem = check_inline_config(inline)
            if problem:
                raise HostError(f"--pass-env OPENCODE_CONFIG_CONTENT is refused: {problem}")

    def prepare(self, context: TrialContext) -> None:
        """Copy the credentials and write the sandbox configuration for one trial.

        Raises:
            HostError: a fixture config collides, a ``--pass-env`` variable would
                change the policy, or the credentials cannot be copied.
        """
        _path, dialect = self._probed()
        target = config_target(context.project_root)
        try:
            check_fixture_configs(context.sandbox, target)
        except ConfigError as exc:
            raise HostError(str(exc)) from None
        self.check_pass_env(context.pass_env)
        self._copy_credentials(context.state_dir, dialect)
        agents = [context.agent] if context.agent else []
        config = build_config(
            dialect, [*agents, *context.native.agent_ids], quiet=self.quiet_config
        )
        if context.gateway is not None:
            provider = opencode_route(
                context.gateway,
                model=context.model,
                dialect=dialect,
                auth_json=context.state_dir / "data" / "opencode" / "auth.json",
                parent=self._parent_env(),
                pass_env=context.pass_env,
            )
            if provider is not None:
                config["provider"] = opencode_routed_config(context.gateway, provider)
        try:
            write_config(context.sandbox, target, config)
        except ConfigError as exc:
            raise HostError(str(exc)) from None

    def _stored_secrets(self, context: TrialContext) -> list[str]:
        """The string values of the trial's copied ``auth.json`` (its API keys and tokens)."""
        return stored_secret_values(context.state_dir / "data" / "opencode" / "auth.json")

    def _copy_credentials(self, state_dir: Path, dialect: Dialect) -> None:
        data = state_dir / "data" / "opencode"
        auth_json, database = self._auth_json, self._database
        if auth_json is None and (dialect == "v1" or database is None):
            raise HostError(
                "opencode authentication not found; authenticate the host once before running eval"
            )
        try:
            if auth_json is not None:
                copy_private_file(auth_json, data / "auth.json")
            if dialect == "v2" and database is not None:
                copy_v2_database(database, data / "opencode.db")
        except CredentialsError as exc:
            raise HostError(str(exc)) from None

    def argv(self, context: TrialContext) -> list[str]:
        """Return the command line of one trial (the prompt goes on stdin)."""
        path, dialect = self._probed()
        return [
            path,
            "run",
            *(["--standalone"] if dialect == "v2" else []),
            "--format",
            "json",
            "--agent",
            context.agent or "build",
            *(["--model", context.model] if context.model else []),
        ]

    def session_env(self, context: TrialContext) -> dict[str, str]:
        """Return the environment of one trial's session (creating its private dirs)."""
        _path, dialect = self._probed()
        isolation = trial_dirs(context.state_dir)
        if dialect == "v2":
            isolation["OPENCODE_DB"] = str(context.state_dir / "data" / "opencode" / "opencode.db")
        env = session_env(
            isolation=isolation,
            defaults=self.default_env,
            pass_env=[n for n in context.pass_env if n not in OPENCODE_REFUSED_PASS_ENV],
            drop=("OPENCODE_DB",) if dialect == "v1" else (),
            base=self._parent_env(),
        )
        route = context.gateway
        if route is not None and route.bound and context.model and "/" in context.model:
            provider = context.model.split("/", 1)[0]
            opencode_routed_env(env, route, provider, context.pass_env)
        return env

    def stream_parser(self, usage: SessionUsage) -> StreamParser:
        """Return a parser of ``opencode run --format json`` events."""
        return OpenCodeStream(usage)

    def normalizer(self, context: TrialContext) -> OpenCodeNormalizer:
        """Return a reader of the session's events as transcript entries."""
        return OpenCodeNormalizer(version=self._version, model=context.model)

    def session_secrets(self, context: TrialContext, env: Mapping[str, str]) -> list[str]:
        """The ``--pass-env`` values, any secret-named variable and the copied stored keys."""
        return [
            *secret_values(env, credentials=(), pass_env=context.pass_env),
            *self._stored_secrets(context),
        ]
