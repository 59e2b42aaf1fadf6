"""Pytest fixtures for real-host tests: the host binaries and a running mock model server.

``tests/realhost/conftest.py`` exposes them to the tests in this folder. Tests
elsewhere can use them by adding ``pytest_plugins = ["realhost.fixtures"]`` to the
top-level ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .hosts import REQUIRE_ENV, HostsUnavailableError, locate_hosts, say_on_stderr
from .mock_model import MockModelServer


def terminal_say(config: pytest.Config) -> Callable[[str], None]:
    """Print a line on the terminal past pytest's output capture (the install's news)."""
    capture = config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            say_on_stderr(line)

    return say


def require_hosts(config: pytest.Config | None = None) -> Path:
    """Return the real hosts' bin directory, or skip (fail under ``REQUIRE_ENV=1``) the test.

    A first install prints a line before and after it on the terminal (``config``'s).
    """
    try:
        return locate_hosts(say=terminal_say(config) if config is not None else say_on_stderr)
    except HostsUnavailableError as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"real hosts required ({REQUIRE_ENV}=1) but unavailable: {exc}")
        pytest.skip(f"real hosts unavailable: {exc}")


@pytest.fixture(scope="session")
def real_hosts(pytestconfig: pytest.Config) -> Path:
    """Return the directory holding the real ``claude`` and ``opencode`` executables.

    Skips the test when they are unavailable, or fails it when
    ``ATLANTE_EVAL_REQUIRE_REAL_HOSTS=1`` (as CI sets it).
    """
    return require_hosts(pytestconfig)


@pytest.fixture
def mock_model() -> Iterator[MockModelServer]:
    """Yield a started mock model server with no scripts; it is stopped afterwards."""
    with MockModelServer() as server:
        yield server
