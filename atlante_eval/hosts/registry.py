"""The built-in hosts, keyed by :data:`~atlante_eval.choices.HostName`.

Adding a host is its module under ``hosts/`` (a :class:`~atlante_eval.hosts.session.CliHost`
that declares its command line, environment, stream parser, transcript normalizer
and model endpoints) plus one entry in :data:`HOST_FACTORIES`, its name in
``HostName``, and what the project layer must know before any host is created (its
build's manifest and the agents it ships) in :data:`atlante_eval.project.native.NATIVE_HOSTS`.
``tests/test_registries.py`` fails until these agree.
"""

from __future__ import annotations

from collections.abc import Callable

from ..choices import HostName
from ..diagnostics import DiagnosticError, error
from .base import Host

__all__ = ["HOST_FACTORIES", "create_host"]


def _opencode() -> Host:
    from .opencode import OpenCodeHost

    return OpenCodeHost()


def _claude_code() -> Host:
    from .claude_code import ClaudeCodeHost

    return ClaudeCodeHost()


#: The built-in hosts by configured name (imported only when one is created).
HOST_FACTORIES: dict[HostName, Callable[[], Host]] = {
    "opencode": _opencode,
    "claude-code": _claude_code,
}


def create_host(name: str) -> Host:
    """Return the built-in host for ``name`` (``opencode`` or ``claude-code``).

    Raises:
        DiagnosticError: ``eval-host-unavailable`` for an unknown name (exit 3).
    """
    factory = next((f for known, f in HOST_FACTORIES.items() if known == name), None)
    if factory is None:
        raise DiagnosticError(
            [
                error(
                    "eval-host-unavailable",
                    f"unknown host {name!r}",
                    expected=" or ".join(HOST_FACTORIES),
                )
            ]
        )
    return factory()
