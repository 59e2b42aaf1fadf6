"""Locate the real ``claude`` and ``opencode`` CLIs: the pinned versions in the managed host cache.

The real-host tests run the hosts the way a pinned project does: from
atlante-eval's managed host cache (``$ATLANTE_EVAL_HOST_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/atlante-eval/hosts``), each version checked against
its recorded integrity before use. A version the cache lacks is installed there
with :func:`atlante_eval.hosts.managed.install_host` (npm, which reuses its own
cache of the tarballs), unless ``ATLANTE_EVAL_HOST_INSTALL=0``;
``tools/install_hosts.sh`` does the same ahead of time (CI). The cache's lock
makes concurrent test runs install once.

:func:`locate_hosts` returns a directory holding ``claude`` and ``opencode``
links to the cached executables, for tests that start the CLIs themselves; tests
that go through ``run_eval`` pin the versions (:data:`PINNED`) and run them from
the cache as a user's pinned run does.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

import anyio

from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.hosts.cache import host_cache_root
from atlante_eval.hosts.managed import cached_host, install_host
from atlante_eval.report import HostInstallProgress

CLAUDE_CODE_VERSION = "2.1.332"
"""The Claude Code release the real-host tests are written against."""

OPENCODE_VERSION = "1.18.33"
"""The OpenCode release the real-host tests are written against."""

PINNED: Mapping[str, str] = {"claude-code": CLAUDE_CODE_VERSION, "opencode": OPENCODE_VERSION}
"""Host name -> the version the real-host tests pin."""

EXECUTABLES: Mapping[str, str] = {"claude": "claude-code", "opencode": "opencode"}
"""Executable name -> host name."""

REQUIRE_ENV = "ATLANTE_EVAL_REQUIRE_REAL_HOSTS"
"""Set to ``1`` to make unavailable hosts a test failure instead of a skip (CI)."""

INSTALL_ENV = "ATLANTE_EVAL_HOST_INSTALL"
"""Set to ``0`` to never run npm; versions missing from the cache are then unavailable."""


class HostsUnavailableError(RuntimeError):
    """Raised by :func:`locate_hosts` when the CLIs are neither cached nor installable."""


SAY_PREFIX = "atlante-eval tests:"
"""How the lines the install prints to the terminal begin."""


def say_on_stderr(line: str) -> None:
    """Print one line of the install's news on stderr."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


def _progress(say: Callable[[str], None]) -> Callable[[HostInstallProgress], None]:
    """Each install step as one line: before a version's install and after it."""
    from atlante_eval.views.hosts_render import install_line

    def progress(event: HostInstallProgress) -> None:
        say(f"{SAY_PREFIX} {install_line(event)}")

    return progress


def managed_executables(
    *, install: bool, say: Callable[[str], None] = say_on_stderr
) -> dict[str, Path]:
    """Each pinned host's executable in the managed cache, installing what is missing.

    Raises:
        HostsUnavailableError: a version is missing or broken and may not (or could
            not) be installed.
    """
    found: dict[str, Path] = {}
    for host, version in PINNED.items():
        entry = cached_host(host, version)
        if not entry.ok and not install:
            raise HostsUnavailableError(
                f"{host} {version} is {entry.state} in the managed host cache "
                f"{host_cache_root()} ({INSTALL_ENV}=0); run tools/install_hosts.sh"
            )
        if not entry.ok:
            try:
                entry, _ = anyio.run(
                    partial(install_host, host, version, on_progress=_progress(say))
                )
            except DiagnosticError as exc:
                raise HostsUnavailableError(
                    "; ".join(f"[{d.code}] {d.message}: {d.cause}" for d in exc.diagnostics)
                ) from None
        found[host] = entry.executable
    return found


def bin_dir_of(executables: Mapping[str, Path]) -> Path:
    """A directory of ``claude`` and ``opencode`` links to ``executables`` (made once, shared)."""
    by_name = {name: executables[host] for name, host in EXECUTABLES.items()}
    key = "\n".join(f"{name}={path}" for name, path in sorted(by_name.items()))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"atlante-realhost-bin-{os.getuid()}-{digest}"
    if all((target / name).resolve() == path.resolve() for name, path in by_name.items()):
        return target
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    for name, path in by_name.items():
        (staging / name).symlink_to(path)
    try:
        staging.rename(target)
    except OSError:  # another process made it first: the same links
        for name in by_name:
            (staging / name).unlink()
        staging.rmdir()
    return target


def locate_hosts(
    *, install: bool | None = None, say: Callable[[str], None] = say_on_stderr
) -> Path:
    """Return a directory holding links to the pinned, checked ``claude`` and ``opencode``.

    Args:
        install: Whether npm may install missing versions into the managed cache; by
            default yes unless ``ATLANTE_EVAL_HOST_INSTALL=0``.
        say: receives a line before each version's install and one after it.

    Raises:
        HostsUnavailableError: the hosts are not cached and cannot be installed.
    """
    if install is None:
        install = os.environ.get(INSTALL_ENV, "1") != "0"
    return bin_dir_of(managed_executables(install=install, say=say))
