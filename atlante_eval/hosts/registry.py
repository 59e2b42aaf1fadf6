"""The built-in hosts, keyed by :data:`~atlante_eval.choices.HostName`.

Adding a host is its module under ``hosts/`` (a :class:`~atlante_eval.hosts.session.CliHost`
that declares its command line, environment, stream parser, transcript normalizer
and model endpoints) plus one entry in :data:`HOST_FACTORIES`, its name in
``HostName``, and what the project layer must know before any host is created (its
build's manifest and the agents it ships) in :data:`atlante_eval.project.native.NATIVE_HOSTS`.
``tests/test_registries.py`` fails until these agree.
"""

from __future__ import annotations

from typing import Protocol

from ..choices import HostName
from ..diagnostics import DiagnosticError, error
from .base import Host

__all__ = ["HOST_FACTORIES", "HostFactory", "create_host"]


class HostFactory(Protocol):
    """Creates an unprobed host; ``binary`` is its executable (default: its command on PATH)."""

    def __call__(self, binary: str | None = None) -> Host: ...


def _opencode(binary: str | None = None) -> Host:
    from .opencode import OpenCodeHost

    return OpenCodeHost() if binary is None else OpenCodeHost(binary)


def _claude_code(binary: str | None = None) -> Host:
    from .claude_code import ClaudeCodeHost

    return ClaudeCodeHost() if binary is None else ClaudeCodeHost(binary)


#: The built-in hosts by configured name (imported only when one is created).
HOST_FACTORIES: dict[HostName, HostFactory] = {
    "opencode": _opencode,
    "claude-code": _claude_code,
}


def create_host(name: str, *, binary: str | None = None) -> Host:
    """Return the built-in host for ``name`` (``opencode`` or ``claude-code``).

    ``binary`` is the executable to run (a managed copy, see :mod:`.managed`);
    by default the host's command is looked up on PATH.

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
    return factory() if binary is None else factory(binary)
