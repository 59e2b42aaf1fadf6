"""Environments for child processes: the allowlist, proxy sanitising, hardened git.

Hosts, command checks and post-trial git receive only an allowlisted slice of the
parent environment (spec §6.5) plus what each caller adds explicitly. Proxy URLs
lose their credentials; scheme-less or host-less proxy values are dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ALLOWED_ENV", "allowed_env", "git_env", "sanitize_proxy"]

#: Variables passed from the parent environment to hosts, checks and git.
ALLOWED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
_PROXIES = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})


def sanitize_proxy(value: str) -> str | None:
    """Return ``value`` without user name and password, or ``None`` if it has no host."""
    try:
        parts = urlsplit(value)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc = f"{netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, parts.fragment))


def allowed_env(
    base: Mapping[str, str] | None = None, *, extra: Iterable[str] = ()
) -> dict[str, str]:
    """Return the allowlisted slice of ``base`` (default: ``os.environ``).

    Args:
        base: the parent environment.
        extra: further variable names to pass verbatim (``--pass-env``).
    """
    source = os.environ if base is None else base
    result: dict[str, str] = {}
    for name in ALLOWED_ENV:
        value = source.get(name)
        if value is None:
            continue
        if name in _PROXIES:
            cleaned = sanitize_proxy(value)
            if cleaned is not None:
                result[name] = cleaned
        else:
            result[name] = value
    for name in extra:
        if name in source:
            result[name] = source[name]
    return result


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return an allowlisted environment for git that ignores user and system config.

    Hooks, templates, fsmonitor, attributes and filters from the user's global or
    system git configuration can run code or change what git reports; none applies,
    and replace refs never substitute one object for another.
    """
    env = allowed_env(base)
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
        }
    )
    return env
