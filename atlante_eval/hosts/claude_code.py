"""The Claude Code host (``>=2.0.0 <3.0.0``).

Per run, :meth:`ClaudeCodeHost.probe` reads ``claude --version`` and finds a
credential mode. Per trial, :meth:`ClaudeCodeHost.prepare` refuses fixture files
Claude Code would merge with the generated configuration, copies only the
credentials file, writes ``.claude/settings.json`` with the containment policy and
pre-accepts workspace trust for the sandbox alone (without trust, Claude Code
ignores the allow policy). :meth:`ClaudeCodeHost.run_session` runs
``claude -p --output-format stream-json --verbose --setting-sources project`` with
the prompt on stdin, in an environment whose HOME, CLAUDE_CONFIG_DIR, XDG and temp
directories belong to the trial alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._util.endpoints import Endpoint
from .._util.paths import UnsafePathError, resolve_no_follow
from ..diagnostics import DiagnosticError, error
from ..project.native import NATIVE_HOSTS
from .base import HostError, SessionUsage, StreamParser, TrialContext, secret_values
from .claude_transcript import ClaudeNormalizer
from .credentials import (
    CLAUDE_AUTH_ENV,
    ClaudeAuthMode,
    CredentialsError,
    claude_auth_status,
    claude_credentials_checked,
    claude_credentials_file,
    claude_env_auth_mode,
    copy_private_file,
    stored_secret_values,
)
from .isolation import session_env, trial_dirs
from .routing import claude_route, claude_routed_env
from .session import CliHost
from .streams import ClaudeStream
from .versions import probe_version

__all__ = [
    "CLAUDE_CODE_RANGE",
    "CLAUDE_DEFAULT_ENV",
    "CLAUDE_IGNORED_CHANGES",
    "CLAUDE_MODEL_ENDPOINTS",
    "CLAUDE_REJECTED_FIXTURE_FILES",
    "ClaudeCodeHost",
    "claude_settings",
    "trust_document",
]

#: Claude Code's own runtime file in a sandbox, which diff-allowlist ignores (as the
#: reference does). Claude Code 2.x in headless mode keeps its state in
#: CLAUDE_CONFIG_DIR and TMPDIR (measured with 2.1.332), but it may record local
#: permission choices in ``.claude/settings.local.json``, a file it never reads
#: back under ``--setting-sources project``. Every other change under ``.claude/``
#: (native agents and skills, the generated ``settings.json``) is graded.
CLAUDE_IGNORED_CHANGES: Sequence[str] = (".claude/settings.local.json",)

#: The model API Claude Code reaches by default (its sessions may, under ``--isolation os``).
CLAUDE_MODEL_ENDPOINTS: tuple[Endpoint, ...] = (Endpoint("api.anthropic.com", 443),)

#: Supported Claude Code versions (declared with the host's release in ``NATIVE_HOSTS``).
(CLAUDE_CODE_RANGE,) = NATIVE_HOSTS["claude-code"].versions

#: Switches that keep a trial's Claude Code off the network except for model calls
#: (measured: no telemetry, no MCP registry, no update check).
CLAUDE_DEFAULT_ENV: Mapping[str, str] = {
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
}

#: Fixture files Claude Code would load or merge alongside the generated configuration.
CLAUDE_REJECTED_FIXTURE_FILES = (
    ".mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
)

_SETTINGS_PATH = ".claude/settings.json"
_INSTALL_HINT = (
    "install Claude Code (npm install -g @anthropic-ai/claude-code) and make sure claude is on PATH"
)


def claude_settings() -> dict[str, Any]:
    """Return the sandbox ``.claude/settings.json``: the containment policy, nothing else."""
    return {
        "permissions": {
            "allow": ["Read", "Edit", "Write", "Glob", "Grep", "Bash", "Skill", "Agent"],
            "deny": [
                "Bash(rm -rf *)",
                "Bash(rm -fr *)",
                "Bash(sudo *)",
                "WebFetch",
                "WebSearch",
                "AskUserQuestion",
            ],
        }
    }


def trust_document(sandbox: Path) -> dict[str, Any]:
    """Return the global config that pre-accepts workspace trust for ``sandbox`` only.

    The key is the real path, because Claude Code resolves symbolic links in its
    working directory (e.g. macOS ``/var`` -> ``/private/var``).
    """
    return {"projects": {os.path.realpath(sandbox): {"hasTrustDialogAccepted": True}}}


def _write_json(path: Path, value: Mapping[str, Any], mode: int = 0o644) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, mode), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


class ClaudeCodeHost(CliHost):
    """Runs trials on the Claude Code CLI."""

    name = "claude-code"
    command = "claude"
    ignored_changes: Sequence[str] = CLAUDE_IGNORED_CHANGES
    model_endpoints = CLAUDE_MODEL_ENDPOINTS

    def __init__(self, binary: str = "claude", *, env: Mapping[str, str] | None = None) -> None:
        """Create an unprobed host (``binary`` looked up on PATH; ``env`` for tests)."""
        super().__init__(binary, env=env)
        self._auth_mode: ClaudeAuthMode | None = None

    @property
    def auth_mode(self) -> ClaudeAuthMode | None:
        """How the host authenticates (``api-key``, ``oauth``, ``auth-status``, ...)."""
        return self._auth_mode

    @property
    def credentials_checked(self) -> str | None:
        """What the probe found about credentials, in words (``None`` before it ran)."""
        if self._auth_mode is None:
            return None
        return claude_credentials_checked(self._auth_mode, self._parent_env())

    async def probe(self) -> None:
        """Probe the version (once per run) and the credential mode.

        Raises:
            DiagnosticError: ``eval-host-unavailable``, ``eval-host-unsupported-version``
                or ``eval-host-unauthenticated`` (exit 3).
        """
        env = dict(self._parent_env())
        path, version, _range = await probe_version(
            self._binary,
            label=self.name,
            ranges=(CLAUDE_CODE_RANGE,),
            install_hint=_INSTALL_HINT,
            env=env,
        )
        mode = claude_env_auth_mode(env)
        if mode is None and await claude_auth_status(path, env):
            mode = "auth-status"
        if mode is None:
            raise DiagnosticError(
                [
                    error(
                        "eval-host-unauthenticated",
                        "claude-code authentication not found",
                        expected="ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, "
                        "CLAUDE_CODE_OAUTH_TOKEN, a CLAUDE_CODE_USE_BEDROCK/VERTEX/FOUNDRY "
                        "mode, or a `claude auth login` session",
                        next="run `claude setup-token` and export CLAUDE_CODE_OAUTH_TOKEN, "
                        "export ANTHROPIC_API_KEY, or run `claude auth login`, then re-run "
                        "this command",
                    )
                ]
            )
        self._path, self._version, self._auth_mode = path, str(version), mode

    def _probed(self) -> str:
        if self._path is None:
            raise HostError("the claude-code host was not probed before the trial")
        return self._path

    def prepare(self, context: TrialContext) -> None:
        """Check the fixture, copy the credentials, write settings and workspace trust.

        Raises:
            HostError: the fixture provides a file Claude Code would merge, there are
                no credentials, or a file cannot be written.
        """
        self._probed()
        for rel in CLAUDE_REJECTED_FIXTURE_FILES:
            if os.path.lexists(context.sandbox / rel):
                raise HostError(
                    f"the fixture provides {rel}, which Claude Code would load alongside the "
                    "generated sandbox configuration; remove it from the fixture"
                )
        parent = self._parent_env()
        if claude_env_auth_mode(parent) is None and self._auth_mode != "auth-status":
            raise HostError("claude-code authentication not found")
        if context.gateway is not None:
            claude_route(context.gateway, self._auth_mode, parent)
        routed = context.gateway is not None and context.gateway.bound
        config_dir = context.state_dir / "claude-config"
        try:
            config_dir.mkdir(parents=True, exist_ok=True)
            # Routed, the session authenticates with a stand-in token: no login file travels.
            credentials = None if routed else claude_credentials_file(parent)
            if credentials is not None:
                copy_private_file(credentials, config_dir / ".credentials.json")
            settings = resolve_no_follow(context.sandbox, _SETTINGS_PATH)
            settings.parent.mkdir(parents=True, exist_ok=True)
            _write_json(resolve_no_follow(context.sandbox, _SETTINGS_PATH), claude_settings())
            _write_json(config_dir / ".claude.json", trust_document(context.sandbox), 0o600)
        except (CredentialsError, UnsafePathError, OSError) as exc:
            raise HostError(f"could not prepare the claude-code sandbox: {exc}") from None

    def argv(self, context: TrialContext) -> list[str]:
        """Return the command line of one trial (the prompt goes on stdin)."""
        return [
            self._probed(),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--setting-sources",
            "project",
            "--strict-mcp-config",
            *(["--agent", context.agent] if context.agent else []),
            *(["--model", context.model] if context.model else []),
        ]

    def session_env(self, context: TrialContext) -> dict[str, str]:
        """Return the environment of one trial's session (creating its private dirs)."""
        isolation = trial_dirs(context.state_dir)
        config_dir = context.state_dir / "claude-config"
        config_dir.mkdir(parents=True, exist_ok=True)
        isolation["CLAUDE_CONFIG_DIR"] = str(config_dir)
        isolation["CLAUDE_CODE_TMPDIR"] = isolation["TMPDIR"]
        env = session_env(
            isolation=isolation,
            credentials=CLAUDE_AUTH_ENV,
            defaults=CLAUDE_DEFAULT_ENV,
            pass_env=context.pass_env,
            base=self._parent_env(),
        )
        if context.gateway is not None and context.gateway.bound:
            claude_routed_env(env, context.gateway)
        return env

    def stream_parser(self, usage: SessionUsage) -> StreamParser:
        """Return a parser of ``claude -p --output-format stream-json`` events."""
        return ClaudeStream(usage)

    def normalizer(self, context: TrialContext) -> ClaudeNormalizer:
        """Return a reader of the session's events as transcript entries."""
        return ClaudeNormalizer(version=self._version)

    def session_secrets(self, context: TrialContext, env: Mapping[str, str]) -> list[str]:
        """The credential variables, the ``--pass-env`` values, any secret-named variable
        and the tokens of the copied ``.credentials.json``."""
        return [
            *secret_values(env, credentials=CLAUDE_AUTH_ENV, pass_env=context.pass_env),
            *stored_secret_values(context.state_dir / "claude-config" / ".credentials.json"),
        ]
