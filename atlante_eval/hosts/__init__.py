"""Hosts: the seam between the engine and a coding-agent CLI, and the registry.

The engine depends only on :class:`Host`; :func:`create_host` picks the concrete
host for a configured name (the CLI and ``run_eval`` wire it at the edge).
"""

from __future__ import annotations

from collections.abc import Callable

from ..diagnostics import DiagnosticError, error
from .base import Host, HostError, SessionEnd, SessionUsage, TrialContext

__all__ = [
    "HOST_FACTORIES",
    "Host",
    "HostError",
    "SessionEnd",
    "SessionUsage",
    "TrialContext",
    "create_host",
]


def _opencode() -> Host:
    from .opencode import OpenCodeHost

    return OpenCodeHost()


def _claude_code() -> Host:
    from .claude_code import ClaudeCodeHost

    return ClaudeCodeHost()


#: The built-in hosts by configured name.
HOST_FACTORIES: dict[str, Callable[[], Host]] = {
    "opencode": _opencode,
    "claude-code": _claude_code,
}


def create_host(name: str) -> Host:
    """Return the built-in host for ``name`` (``opencode`` or ``claude-code``).

    Raises:
        DiagnosticError: ``eval-host-unavailable`` for an unknown name (exit 3).
    """
    factory = HOST_FACTORIES.get(name)
    if factory is None:
        raise DiagnosticError(
            [
                error(
                    "eval-host-unavailable",
                    f"unknown host {name!r}",
                    expected="opencode or claude-code",
                )
            ]
        )
    return factory()
