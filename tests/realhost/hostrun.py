"""Run a real host CLI headless against the mock, in an isolated home, and read its events.

These helpers are for the tests that prove the mock against the real CLIs; the
engine's host adapters build their own command lines and environments.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .mock_model import MockModelServer

MOCK_MODEL = "mock-model"
"""The model name both hosts are told to use."""

RUN_TIMEOUT = 120.0
"""Seconds one CLI run may take before it is killed (a run normally takes 1-10 s)."""

CLAUDE_OFFLINE_ENV: Mapping[str, str] = {
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "DISABLE_AUTOUPDATER": "1",
}
"""Keep Claude Code off the network (telemetry, MCP registry) and fail fast on 5xx."""

OPENCODE_OFFLINE_ENV: Mapping[str, str] = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    # Its background `npm install @opencode-ai/plugin` goes to a dead port and fails harmlessly.
    "npm_config_registry": "http://127.0.0.1:9/",
}
"""Keep OpenCode off the network (model catalogue, updates, LSP, plugin installs)."""


@dataclass(frozen=True)
class HostRun:
    """What one CLI run produced."""

    returncode: int
    """Exit status (negative: killed by that signal)."""
    stdout: str
    """Everything printed on stdout."""
    stderr: str
    """Everything printed on stderr."""
    duration: float
    """Wall-clock seconds."""

    @property
    def events(self) -> list[dict[str, Any]]:
        """Parse stdout as one JSON object a line, skipping lines that are not JSON."""
        found: list[dict[str, Any]] = []
        for line in self.stdout.splitlines():
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    found.append(value)
        return found

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """Return the events whose ``type`` is ``kind``."""
        return [e for e in self.events if e.get("type") == kind]


def isolated_env(root: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """Return an environment whose HOME, XDG dirs and TMPDIR all live under ``root``.

    Only PATH, LANG and TERM are taken from the parent, so no real credentials
    or configuration leak into the run.
    """
    dirs = {
        "HOME": root / "home",
        "XDG_CONFIG_HOME": root / "home" / ".config",
        "XDG_DATA_HOME": root / "home" / ".local" / "share",
        "XDG_STATE_HOME": root / "home" / ".local" / "state",
        "XDG_CACHE_HOME": root / "home" / ".cache",
        "XDG_RUNTIME_DIR": root / "run",
        "TMPDIR": root / "tmp",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    (root / "run").chmod(0o700)
    env = {name: str(path) for name, path in dirs.items()}
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    env["LANG"] = os.environ.get("LANG", "C.UTF-8")
    env["TERM"] = "dumb"
    return {**env, **extra}


def proxy_trap_env(mock: MockModelServer) -> dict[str, str]:
    """Make ``mock`` the HTTP(S) proxy for every host but loopback.

    A client that honours the proxy variables (both CLIs and npm do) then sends any
    request meant for another host to the mock, which logs it as kind ``proxy`` and
    refuses it: the way to see traffic that would otherwise leave the machine.
    """
    local = "127.0.0.1,localhost,::1"
    proxies = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
    return {**dict.fromkeys(proxies, mock.url), "NO_PROXY": local, "no_proxy": local}


def claude_env(root: Path, mock: MockModelServer, **extra: str) -> dict[str, str]:
    """Return an isolated environment that points Claude Code at ``mock`` (and its proxy trap)."""
    config_dir = root / "home" / ".claude"
    config_dir.mkdir(parents=True, exist_ok=True)
    tmp = root / "tmp"
    return isolated_env(
        root,
        {
            "ANTHROPIC_BASE_URL": mock.anthropic_base_url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CONFIG_DIR": str(config_dir),
            "CLAUDE_CODE_TMPDIR": str(tmp),
            **proxy_trap_env(mock),
            **CLAUDE_OFFLINE_ENV,
            **extra,
        },
    )


def trust_workspace(env: Mapping[str, str], workdir: Path) -> Path:
    """Mark ``workdir`` trusted in Claude Code's global config, so project settings apply.

    With ``CLAUDE_CONFIG_DIR`` set, only ``$CLAUDE_CONFIG_DIR/.claude.json`` counts
    (``$HOME/.claude.json`` is then ignored); returns the file written.
    """
    config_dir = Path(env.get("CLAUDE_CONFIG_DIR") or env["HOME"])
    path = config_dir / ".claude.json"
    data = {"projects": {str(workdir.resolve()): {"hasTrustDialogAccepted": True}}}
    path.write_text(json.dumps(data))
    return path


def claude_argv(bin_dir: Path, *flags: str) -> list[str]:
    """Return the command line for one headless Claude Code run; the prompt goes on stdin."""
    return [
        str(bin_dir / "claude"),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        MOCK_MODEL,
        *flags,
    ]


def opencode_config(
    mock: MockModelServer, *, permission: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Return an OpenCode config with one openai-compatible provider ``mock`` at ``mock``."""
    model = {"tool_call": True, "limit": {"context": 128000, "output": 4096}}
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": mock.openai_base_url, "apiKey": "test"},
                "models": {MOCK_MODEL: model},
            }
        },
        "model": f"mock/{MOCK_MODEL}",
        "small_model": f"mock/{MOCK_MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "permission": dict(permission or {"edit": "allow", "bash": "allow"}),
    }


def opencode_env(
    root: Path, mock: MockModelServer, config: Mapping[str, Any] | None = None, **extra: str
) -> dict[str, str]:
    """Return an isolated environment that hands OpenCode ``config`` inline.

    ``config`` defaults to :func:`opencode_config` for ``mock``; the proxy trap is set.
    """
    content = json.dumps(opencode_config(mock) if config is None else config)
    base = {"OPENCODE_CONFIG_CONTENT": content, **proxy_trap_env(mock)}
    return isolated_env(root, {**base, **OPENCODE_OFFLINE_ENV, **extra})


def opencode_argv(bin_dir: Path, *flags: str) -> list[str]:
    """Return the command line for one headless OpenCode run; the prompt goes on stdin."""
    return [str(bin_dir / "opencode"), "run", "--format", "json", *flags]


def run_host(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    prompt: str,
    timeout: float = RUN_TIMEOUT,
) -> HostRun:
    """Run ``argv`` in its own process group with ``prompt`` on stdin; return its output.

    Output goes to files, not pipes, so a lingering grandchild (OpenCode's background
    npm) cannot hold the run open; when the CLI exits, whatever is left of its
    process group is killed.
    """
    logs = Path(env["TMPDIR"])
    out_path, err_path = logs / "host.stdout", logs / "host.stderr"
    start = time.monotonic()
    with Path(out_path).open("wb") as out, Path(err_path).open("wb") as err:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            process.communicate(prompt.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.wait()
        finally:
            _kill_group(process.pid)
    return HostRun(
        returncode=process.returncode,
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
        duration=time.monotonic() - start,
    )


def _kill_group(pgid: int) -> None:
    """Kill every process left in the group ``pgid`` (ignoring an empty group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
