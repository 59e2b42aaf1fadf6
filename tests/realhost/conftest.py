"""Fixtures for the real-host tests: ``real_hosts`` and ``mock_model``.

The first real-host test of a session finds (or installs, printing a line before
and after on the terminal) the pinned hosts, whichever fixture or helper asks first.
"""

import contextlib

import pytest

from .fixtures import mock_model, real_hosts, terminal_say
from .hosts import HostsUnavailableError, locate_hosts

__all__ = ["install_hosts_visibly", "mock_model", "real_hosts"]


@pytest.fixture(scope="session", autouse=True)
def install_hosts_visibly(pytestconfig: pytest.Config) -> None:
    """Install the pinned hosts, if needed, where pytest's capture cannot hide it."""
    with contextlib.suppress(HostsUnavailableError):
        locate_hosts(say=terminal_say(pytestconfig))
