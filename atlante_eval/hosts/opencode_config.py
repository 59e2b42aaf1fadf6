"""The OpenCode sandbox configuration: where it goes, what it says, what may not collide.

The configuration is authored fresh for every trial in the dialect of the probed
OpenCode version; nothing is read from the project's own OpenCode settings, so
project providers, plugins, MCP servers and permissions never reach a trial. It
carries one containment policy, identical for every agent (spec §6.4).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._util.jsondoc import DocumentParseError, parse_document
from .._util.paths import UnsafePathError, resolve_no_follow

__all__ = [
    "CONFIG_CANDIDATES",
    "DEFAULT_CONFIG_PATH",
    "DIALECTS",
    "INLINE_CONFIG_KEYS",
    "QUIET_DISABLED_AGENTS",
    "ConfigError",
    "Dialect",
    "DialectKeys",
    "build_config",
    "check_fixture_configs",
    "check_inline_config",
    "config_target",
    "v1_policy",
    "v2_policy",
    "write_config",
]

Dialect = Literal["v1", "v2"]

#: Project config paths OpenCode reads, highest precedence first.
CONFIG_CANDIDATES = (
    ".opencode/opencode.jsonc",
    ".opencode/opencode.json",
    "opencode.jsonc",
    "opencode.json",
)
#: Where the sandbox config goes when the project has none.
DEFAULT_CONFIG_PATH = "opencode.jsonc"
#: Top-level keys ``OPENCODE_CONFIG_CONTENT`` may carry into a trial (providers only).
INLINE_CONFIG_KEYS = frozenset(
    {"$schema", "provider", "providers", "model", "small_model", "enabled_providers",
     "disabled_providers"}
)  # fmt: skip
_SCHEMA_URL = "https://opencode.ai/config.json"
#: Built-in OpenCode agents a quiet configuration switches off: ``title`` makes one
#: model call per session to name it, which the task never asked for.
QUIET_DISABLED_AGENTS = ("title",)


class ConfigError(Exception):
    """Raised when the sandbox configuration cannot be written or a fixture collides."""


@dataclass(frozen=True, slots=True)
class DialectKeys:
    """The field names a dialect uses."""

    agents: str
    permissions: str
    shell: str
    subagent: str
    mcp: str
    """Where MCP servers would live (never written: no MCP server reaches a trial)."""


#: The V1 and V2 dialects (spec §6.2).
DIALECTS: Mapping[Dialect, DialectKeys] = {
    "v1": DialectKeys("agent", "permission", "bash", "task", "mcp"),
    "v2": DialectKeys("agents", "permissions", "shell", "subagent", "mcp.servers"),
}

_DESTRUCTIVE = ("rm -rf *", "rm -fr *", "sudo *")


def v1_policy() -> dict[str, Any]:
    """Return the V1 containment policy object (a fresh copy)."""
    return {
        "edit": "allow",
        "read": {"*": "allow", "*.env": "deny", "*.env.*": "deny", "*.env.example": "allow"},
        "glob": "allow",
        "grep": "allow",
        "list": "allow",
        "task": "allow",
        "skill": "allow",
        "lsp": "allow",
        "question": "deny",
        "todowrite": "allow",
        "doom_loop": "allow",
        "webfetch": "deny",
        "websearch": "deny",
        "external_directory": "deny",
        "bash": {"*": "allow", **dict.fromkeys(_DESTRUCTIVE, "deny")},
    }


def v2_policy() -> list[dict[str, str]]:
    """Return the V2 containment policy rule list (a fresh copy)."""
    rules = [
        ("edit", "*", "allow"),
        ("read", "*", "allow"),
        ("read", "*.env", "deny"),
        ("read", "*.env.*", "deny"),
        ("read", "*.env.example", "allow"),
        ("glob", "*", "allow"),
        ("grep", "*", "allow"),
        ("subagent", "*", "allow"),
        ("skill", "*", "allow"),
        ("question", "*", "deny"),
        ("shell", "*", "allow"),
        ("webfetch", "*", "deny"),
        ("websearch", "*", "deny"),
        ("external_directory", "*", "deny"),
        *(("shell", pattern, "deny") for pattern in _DESTRUCTIVE),
    ]
    return [{"action": a, "resource": r, "effect": e} for a, r, e in rules]


def config_target(project_root: Path | None) -> str:
    """Return the sandbox-relative config path: the project's highest-precedence config.

    Only existence is checked; the project config's content is never read.
    """
    if project_root is not None:
        for candidate in CONFIG_CANDIDATES:
            if os.path.lexists(project_root / candidate):
                return candidate
    return DEFAULT_CONFIG_PATH


def check_fixture_configs(sandbox: Path, target: str) -> None:
    """Refuse a fixture that provides an OpenCode config at any path but ``target``.

    Raises:
        ConfigError: OpenCode would load that file alongside the generated config.
    """
    for candidate in CONFIG_CANDIDATES:
        if candidate != target and os.path.lexists(sandbox / candidate):
            raise ConfigError(
                f"the fixture provides {candidate}, which OpenCode would load alongside the "
                f"generated host configuration at {target}; remove it from the fixture"
            )


def build_config(dialect: Dialect, agents: Iterable[str], *, quiet: bool = False) -> dict[str, Any]:
    """Return the sandbox configuration: default agent ``build``, one policy for all agents.

    With ``quiet`` (V1 only: V2 has no such keys), host work outside the task is
    switched off: the built-in agents of :data:`QUIET_DISABLED_AGENTS` (unless the
    trial uses that id itself) and session snapshots (a private git repository
    OpenCode updates at every step, for undo). Agent ids are stored as own keys of
    a plain dict, so any id (even ``__proto__``) is safe.
    """
    keys = DIALECTS[dialect]
    policy: Any = v1_policy() if dialect == "v1" else v2_policy()
    agent_blocks: dict[str, Any] = {}
    for agent in ["build", *agents]:
        if agent not in agent_blocks:
            copy = v1_policy() if dialect == "v1" else v2_policy()
            agent_blocks[agent] = {keys.permissions: copy}
    extra: dict[str, Any] = {}
    if quiet and dialect == "v1":
        for helper in QUIET_DISABLED_AGENTS:
            agent_blocks.setdefault(helper, {"disable": True})
        extra["snapshot"] = False
    return {
        "$schema": _SCHEMA_URL,
        "default_agent": "build",
        **extra,
        keys.permissions: policy,
        keys.agents: agent_blocks,
    }


def write_config(sandbox: Path, target: str, config: Mapping[str, Any]) -> Path:
    """Write ``config`` at ``target`` inside the sandbox (2-space JSON and a newline).

    A fixture file at the exact target is replaced; no symbolic link is followed.

    Raises:
        ConfigError: a path component is a symbolic link or the write failed.
    """
    try:
        path = resolve_no_follow(sandbox, target)
        path.parent.mkdir(parents=True, exist_ok=True)
        path = resolve_no_follow(sandbox, target)
        if os.path.lexists(path):
            path.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(path, flags, 0o644), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    except (UnsafePathError, OSError) as exc:
        raise ConfigError(f"could not write the OpenCode configuration {target}: {exc}") from exc
    return path


def check_inline_config(text: str) -> str | None:
    """Return why an ``OPENCODE_CONFIG_CONTENT`` value may not reach a trial, or ``None``.

    OpenCode merges that variable over the sandbox configuration, so only provider
    definitions and model choices (:data:`INLINE_CONFIG_KEYS`) are accepted: a
    permission, agent, MCP or plugin key would change the containment policy.
    """
    try:
        value = parse_document(text, jsonc=True)
    except DocumentParseError as exc:
        return f"it is not JSON or JSONC ({exc})"
    if not isinstance(value, dict):
        return "it is not a JSON object"
    extra = sorted(set(value) - INLINE_CONFIG_KEYS)
    if extra:
        return (
            f"it sets {', '.join(extra)}; only {', '.join(sorted(INLINE_CONFIG_KEYS))} "
            "may be passed, so the containment policy stays the generated one"
        )
    return None
