"""The real-host suites' one environment helper sets what they need and restores the rest.

It runs without the real CLIs (a stand-in ``bin_dir``), so a broken helper fails
here even where the real-host tests skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .environment import (
    DROPPED_VARIABLES,
    MARKER_VAR,
    OPENCODE_PROVIDER,
    real_host_environment,
)
from .mock_model import MockModelServer


@pytest.mark.parametrize("host", ["claude-code", "opencode"])
def test_the_block_puts_the_clis_first_drops_tokens_and_names_the_mock(
    host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside: CLIs first on PATH, no stored token, the mock named; outside: as before."""
    for name in DROPPED_VARIABLES:
        monkeypatch.setenv(name, f"parent-{name}")
    monkeypatch.setenv("SHARED_PROBE", "parent")
    before = dict(os.environ)
    bin_dir = tmp_path / "bin"
    with (
        MockModelServer() as mock,
        real_host_environment(
            host, mock, tmp_path, bin_dir=bin_dir, marker="m-1", extra={"SHARED_PROBE": "x"}
        ) as pass_env,
    ):
        inside = dict(os.environ)
        urls = {"anthropic": mock.anthropic_base_url, "openai": mock.openai_base_url}
    assert dict(os.environ) == before
    assert inside["PATH"] == f"{bin_dir}{os.pathsep}{before['PATH']}"
    assert not set(DROPPED_VARIABLES) & set(inside)
    assert inside[MARKER_VAR] == "m-1"
    assert inside["SHARED_PROBE"] == "x"
    assert inside["SECRET_MARKER"] == "must-not-leak"
    assert "HTTPS_PROXY" in inside
    assert MARKER_VAR in pass_env
    assert "SHARED_PROBE" not in pass_env
    assert "SECRET_MARKER" not in pass_env
    if host == "claude-code":
        assert inside["ANTHROPIC_BASE_URL"] == urls["anthropic"]
        assert inside["ANTHROPIC_API_KEY"] == "test-key"
        assert pass_env == [MARKER_VAR, "CLAUDE_CODE_MAX_RETRIES"]
    else:
        assert json.loads(inside["OPENCODE_CONFIG_CONTENT"]) == OPENCODE_PROVIDER
        assert inside["MOCK_BASE_URL"] == urls["openai"]
        stored = Path(inside["XDG_DATA_HOME"]) / "opencode" / "auth.json"
        assert json.loads(stored.read_text())["mock"]["key"] == "test-key"
        assert pass_env == [MARKER_VAR, "OPENCODE_CONFIG_CONTENT", "MOCK_BASE_URL"]
