"""Hosts: the seam between the engine and a coding-agent CLI, and the registry.

The engine depends only on :class:`Host`; :func:`create_host` picks the concrete
host for a configured name (the CLI and ``run_eval`` wire it at the edge). The
per-host tables live in :mod:`atlante_eval.hosts.registry`.
"""

from __future__ import annotations

from .base import (
    Host,
    HostError,
    ModelRoute,
    SessionEnd,
    SessionUsage,
    StreamParser,
    TrialContext,
    model_endpoints,
)
from .registry import HOST_FACTORIES, create_host

__all__ = [
    "HOST_FACTORIES",
    "Host",
    "HostError",
    "ModelRoute",
    "SessionEnd",
    "SessionUsage",
    "StreamParser",
    "TrialContext",
    "create_host",
    "model_endpoints",
]
