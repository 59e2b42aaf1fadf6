"""The parent environment of a ``run_eval`` on a real host, and the processes a run leaves.

Every real-host suite that drives ``run_eval`` sets the environment the same way,
through :func:`real_host_environment`: the real CLIs first on ``PATH`` (found as
a user's would be), the credential variables that would win over the mock's
dropped, and the host pointed at the mock the documented way (Claude Code through
``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``; OpenCode through a stored
``auth.json`` key and a provider-only ``OPENCODE_CONFIG_CONTENT`` given with
``--pass-env``). Every host process inherits :data:`MARKER_VAR`, so
:func:`leftovers` can tell whether a run left one behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from .hostrun import proxy_trap_env
from .mock_model import MockModelServer

__all__ = [
    "DROPPED_VARIABLES",
    "HOSTS",
    "MARKER_VAR",
    "OPENCODE_PROVIDER",
    "host_variables",
    "leftovers",
    "marked_processes",
    "real_host_environment",
]

#: The built-in hosts the real-host suites run.
HOSTS = ("claude-code", "opencode")
#: Carried by every host process of a run (passed with ``--pass-env``).
MARKER_VAR = "ATLANTE_TEST_RUN_MARKER"
#: Parent variables dropped for the block: a stored token would win over the mock's
#: API key, and a parent's OpenCode database would replace the trial's own.
DROPPED_VARIABLES = ("CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "OPENCODE_DB")
#: The provider OpenCode reaches the mock through (``MOCK_BASE_URL`` names it).
OPENCODE_PROVIDER = {
    "provider": {
        "mock": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": "{env:MOCK_BASE_URL}"},
            "models": {
                "mock-model": {"tool_call": True, "limit": {"context": 128000, "output": 4096}}
            },
        }
    }
}


def host_variables(
    host: str, mock: MockModelServer, tmp: Path, marker: str
) -> tuple[dict[str, str], list[str]]:
    """Return the parent variables to set and the ``--pass-env`` names for ``host``.

    OpenCode's stored credentials are written under ``tmp/user-data`` (its
    ``XDG_DATA_HOME``). ``SECRET_MARKER`` is set and never passed: a trial's
    environment must not hold it.
    """
    variables = {MARKER_VAR: marker, "SECRET_MARKER": "must-not-leak", **proxy_trap_env(mock)}
    pass_env = [MARKER_VAR]
    if host == "claude-code":
        variables |= {
            "ANTHROPIC_BASE_URL": mock.anthropic_base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        pass_env.append("CLAUDE_CODE_MAX_RETRIES")
    else:
        data = tmp / "user-data"
        (data / "opencode").mkdir(parents=True)
        (data / "opencode" / "auth.json").write_text(
            json.dumps({"mock": {"type": "api", "key": "test-key"}})
        )
        variables |= {
            "XDG_DATA_HOME": str(data),
            "OPENCODE_CONFIG_CONTENT": json.dumps(OPENCODE_PROVIDER),
            "MOCK_BASE_URL": mock.openai_base_url,
        }
        pass_env += ["OPENCODE_CONFIG_CONTENT", "MOCK_BASE_URL"]
    return variables, pass_env


@contextlib.contextmanager
def real_host_environment(
    host: str,
    mock: MockModelServer,
    tmp: Path,
    *,
    bin_dir: Path,
    marker: str,
    extra: Mapping[str, str] | None = None,
) -> Iterator[list[str]]:
    """Set the parent environment of a run on the real ``host`` for the block.

    Puts ``bin_dir`` first on ``PATH``, drops :data:`DROPPED_VARIABLES`, and sets
    :func:`host_variables` plus ``extra``; everything is restored on the way out.

    Yields:
        The ``--pass-env`` names the run needs (``extra`` is not among them).
    """
    variables, pass_env = host_variables(host, mock, tmp, marker)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        for name in DROPPED_VARIABLES:
            patch.delenv(name, raising=False)
        for name, value in {**variables, **(extra or {})}.items():
            patch.setenv(name, value)
        yield pass_env


def marked_processes(marker: str) -> list[int]:
    """Return the pids of live processes whose environment holds ``marker``."""
    found = []
    for entry in (p.name for p in Path("/proc").iterdir()):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ:
            found.append(int(entry))
    return found


def leftovers(marker: str, wait_s: float = 30.0) -> list[int]:
    """Wait up to ``wait_s`` for marked processes to disappear; return those that stay.

    ``wait_s`` is a hang guard for a loaded machine, not a speed bound.
    """
    deadline = time.monotonic() + wait_s
    while (pids := marked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids
