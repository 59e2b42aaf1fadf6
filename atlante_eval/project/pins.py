"""Host version pins: ``eval.hostVersion`` and ``--host-version``, checked before any host runs.

A pin is an exact ``MAJOR.MINOR.PATCH`` inside one of the host's supported
ranges (:data:`~atlante_eval.project.native.NATIVE_HOSTS`). Anything else is
``invalid-host-version`` (exit 2): the configuration, the run's flag and
``hosts install HOST@VERSION`` refuse it in the same words.
"""

from __future__ import annotations

from .._util.versions import is_exact_version, parse_version
from ..diagnostics import Diagnostic, error
from .native import native_host

__all__ = ["EXACT_VERSION", "pin_error", "pin_problem", "supported_versions"]

#: What a pin must look like, in messages.
EXACT_VERSION = "an exact version MAJOR.MINOR.PATCH, such as 2.1.332"


def supported_versions(host: str) -> str:
    """The host's supported ranges in words (``>=2.0.0 <3.0.0``; OpenCode's named)."""
    known = native_host(host)
    if known is None:
        return "a built-in host"
    ranges = known.versions
    return " or ".join(f"{r.name} {r.spec}" if len(ranges) > 1 else r.spec for r in ranges)


def pin_problem(host: str, version: str) -> str | None:
    """Why ``version`` cannot pin ``host``, or ``None`` when it can.

    An unknown host name is not this check's concern (the configuration refuses it).
    """
    if not is_exact_version(version):
        return f"{version!r} is not {EXACT_VERSION} (a range, tag or prefix is not a pin)"
    known = native_host(host)
    parsed = parse_version(version)
    if known is None or parsed is None or any(r.contains(parsed) for r in known.versions):
        return None
    return f"{host} {version} is outside the supported versions ({supported_versions(host)})"


def pin_error(host: str, version: str, *, what: str, **where: object) -> Diagnostic | None:
    """The ``invalid-host-version`` error of a pin ``what`` names, or ``None`` when it is valid.

    Args:
        host: the host the pin is for.
        version: the pinned version as given.
        what: the pin's name in the message (``eval.hostVersion``, ``--host-version``).
        where: the diagnostic's ``source``, ``pointer`` and ``location``, when known.
    """
    problem = pin_problem(host, version)
    if problem is None:
        return None
    return error(
        "invalid-host-version",
        f"{what}: {problem}",
        expected=f"{EXACT_VERSION}; supported {host} versions: {supported_versions(host)}",
        next="pin a supported version (see docs/hosts.md, Pinning), or remove the pin to "
        "use the host on PATH",
        **where,
    )
