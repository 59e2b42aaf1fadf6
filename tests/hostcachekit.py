"""A pinned-host world for tests: a local npm registry, a stand-in Claude Code, a project.

:func:`pinned_world` starts a registry on 127.0.0.1 publishing
``@anthropic-ai/claude-code`` at :data:`PINNED` (and :data:`OTHER`) whose
executable is a stand-in CLI that passes a trial, puts a *different* stand-in
``claude`` (:data:`ON_PATH`) first on PATH, and points npm and the managed host
cache at the test's own directories. The stand-ins record every start:
``calls(world.on_path)`` must stay empty in a pinned run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from factory import make_project
from npmregistry import NpmRegistry, Published, npm_env, require_npm, serve_registry
from npmregistry import standin_host_package as package_files
from stubcli import write_stub

__all__ = [
    "ON_PATH",
    "OTHER",
    "PACKAGE",
    "PINNED",
    "World",
    "closed_port",
    "pinned_world",
    "run_cli",
]

#: The version a test project pins.
PINNED = "2.1.5"
#: Another published version (a resume or an override).
OTHER = "2.1.6"
#: The version of the stand-in ``claude`` on PATH: never started by a pinned run.
ON_PATH = "2.1.9"
PACKAGE = "@anthropic-ai/claude-code"

#: A Claude Code session that passes: one assistant message and a success result.
EVENTS = [
    {
        "type": "assistant",
        "message": {
            "id": "m1",
            "model": "fable-1",
            "usage": {"input_tokens": 3, "output_tokens": 2},
        },
    },
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "total_cost_usd": 0.0,
        "permission_denials": [],
    },
]


@dataclass
class World:
    """Everything a pinned-host test needs."""

    tmp: Path
    registry: NpmRegistry
    published: dict[str, Published]
    """The registry's versions of the package, by version."""
    managed: dict[str, Path]
    """Each published version's stand-in program: its ``calls`` are the installed copy's."""
    on_path: Path
    """The stand-in ``claude`` first on PATH."""
    cache: Path
    """The managed host cache (``ATLANTE_EVAL_HOST_CACHE``)."""
    project: Path
    """A Claude Code project pinned at :data:`PINNED`, one trial per scenario."""
    env: dict[str, str]
    """The environment the world sets (a subprocess CLI gets it)."""

    def entry(self, version: str = PINNED) -> Path:
        """A version's directory in the managed cache."""
        return self.cache / "claude-code" / version


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextmanager
def pinned_world(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """Start the registry and set the environment (restored afterwards) for the block."""
    require_npm()
    with serve_registry() as registry:
        published: dict[str, Published] = {}
        managed: dict[str, Path] = {}
        for version in (PINNED, OTHER):
            files, program = package_files(tmp / f"package-{version}", "claude", version,
                                           events=EVENTS)  # fmt: skip
            published[version] = registry.publish(PACKAGE, version, files)
            managed[version] = program
        on_path = write_stub(tmp / "path-bin", "claude", version=ON_PATH, events=EVENTS)
        env = {
            **npm_env(tmp, registry.url),
            "ATLANTE_EVAL_HOST_CACHE": str(tmp / "host-cache"),
            "PATH": f"{on_path.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(tmp / "home"),
            "ANTHROPIC_API_KEY": "sk-test",
            "NO_COLOR": "1",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for name in ("XDG_CACHE_HOME", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        project = make_project(
            tmp / "project",
            host="claude-code",
            eval_extra={"hostVersion": PINNED, "budget": {"trials": 1}},
        )
        yield World(tmp, registry, published, managed, on_path, tmp / "host-cache", project, env)


def run_cli(
    args: list[str], *, stderr: Path, stdout: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the real ``atlante-eval`` in a subprocess (the test's environment), output to files."""
    with stderr.open("wb") as err, (stdout or stderr.with_suffix(".out")).open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "atlante_eval", *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
