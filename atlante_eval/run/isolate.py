"""Resolve how a run contains its trials: the one place ``run`` and ``selftest`` ask.

:func:`isolation_mode` checks an ``--isolation`` value (``run``'s options model
and ``selftest`` both call it, so a bad value reads the same from either);
:func:`resolve_isolation` takes the mode asked for (else the project's
``eval.isolation``), runs the preflight for ``os`` (``eval-isolation-unavailable``,
exit 3, before any trial) and builds the run's
:class:`~atlante_eval.isolation.trial.IsolationSettings` with the model
endpoints the host declares. :func:`resolve_limits_settings` does the same for
the per-trial resource limits (``eval.limits``, ``--limit``, the ``os``
defaults; ``eval-limits-unavailable``, exit 3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from ..choices import IsolationMode
from ..diagnostics import DiagnosticError, error
from ..hosts import Host, model_endpoints
from ..isolation.limits import LimitSettings, preflight_limits, resolve_limits
from ..project.config import EvalConfig, LimitsConfig

if TYPE_CHECKING:  # bubblewrap's side loads only for a run under ``os``
    from ..isolation.trial import IsolationSettings

__all__ = ["ISOLATION_MODES", "isolation_mode", "resolve_isolation", "resolve_limits_settings"]

#: The modes ``--isolation`` and ``eval.isolation`` accept.
ISOLATION_MODES: tuple[IsolationMode, ...] = get_args(IsolationMode)


def isolation_mode(raw: object) -> IsolationMode | None:
    """Check a requested isolation mode; ``None`` means not asked (``eval.isolation`` applies).

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) for anything but ``none`` or ``os``.
    """
    if raw is None:
        return None
    for mode in ISOLATION_MODES:
        if raw == mode:
            return mode
    allowed = ", ".join(ISOLATION_MODES)
    raise DiagnosticError(
        [
            error(
                "invalid-option",
                f"--isolation must be one of: {allowed} (got {raw!r})",
                expected=allowed,
            )
        ]
    )


async def resolve_isolation(
    requested: object, project_eval: EvalConfig, host: Host
) -> IsolationSettings | None:
    """The run's isolation settings, ``None`` for ``none``, after the preflight for ``os``.

    Args:
        requested: the mode asked for (``--isolation``), or ``None`` for the project's.
        project_eval: the project's ``eval`` section (``isolation``, ``network.allow``).
        host: the run's host, not yet probed (its sessions reach its model endpoints).

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) for an unknown mode;
            ``eval-isolation-unavailable`` (exit 3) when ``os`` cannot work here.
    """
    mode = isolation_mode(requested) or project_eval.isolation
    if mode != "os":
        return None
    from ..isolation.preflight import preflight_isolation
    from ..isolation.trial import IsolationSettings

    bwrap = await preflight_isolation(mode)
    if bwrap is None:
        return None
    return IsolationSettings.build(bwrap, model_endpoints(host), project_eval.network.allow)


async def resolve_limits_settings(
    requested: object, project_eval: EvalConfig, override: LimitsConfig | None = None
) -> LimitSettings:
    """The run's per-trial limits, proven enforceable here before any trial.

    Args:
        requested: the isolation mode asked for (``--isolation``), or ``None`` for the
            project's: ``os`` brings its default limits.
        project_eval: the project's ``eval`` section (``isolation``, ``limits``).
        override: ``--limit`` values, each over its ``eval.limits`` key.

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) for an unknown mode;
            ``eval-limits-unavailable`` (exit 3) when they cannot be enforced here.
    """
    mode = isolation_mode(requested) or project_eval.isolation
    return await preflight_limits(resolve_limits(mode, project_eval.limits, override))
