"""The built-in hosts, keyed by :data:`~atlante_eval.choices.HostName`.

Adding a host is its module under ``hosts/`` plus one entry in each table here
(and its manifest in :data:`atlante_eval.project.native.MANIFESTS`); ``tests/test_registries.py``
fails until every table has exactly the names of ``HostName``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..choices import HostName
from ..diagnostics import DiagnosticError, error
from .base import Host, SessionUsage, StreamParser
from .streams import ClaudeStream, OpenCodeStream

__all__ = ["HOST_FACTORIES", "STREAM_PARSERS", "create_host"]


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

#: Each host's event-stream parser, for host-neutral readers of its stream.
STREAM_PARSERS: dict[HostName, Callable[[SessionUsage], StreamParser]] = {
    "opencode": OpenCodeStream,
    "claude-code": ClaudeStream,
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
