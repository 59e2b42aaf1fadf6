"""Locate the real ``claude`` and ``opencode`` CLIs, installing the pinned versions if needed.

Order of precedence:

1. ``ATLANTE_EVAL_HOST_BIN_DIR``: a directory holding both executables, used as is.
2. The cache ``$XDG_CACHE_HOME/atlante-eval/hosts`` (default ``~/.cache/...``): used when
   its ``node_modules`` holds exactly the pinned versions; otherwise, when ``npm`` is on
   PATH and ``ATLANTE_EVAL_HOST_INSTALL`` is not ``0``, the pinned versions are installed
   there with ``npm install --prefix`` (into a staging folder, then renamed into place).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

CLAUDE_CODE_VERSION = "2.1.332"
"""The Claude Code release the real-host tests are written against."""

OPENCODE_VERSION = "1.18.33"
"""The OpenCode release the real-host tests are written against."""

PACKAGES: Mapping[str, tuple[str, str]] = {
    "claude": ("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION),
    "opencode": ("opencode-ai", OPENCODE_VERSION),
}
"""Executable name -> (npm package, pinned version)."""

BIN_DIR_ENV = "ATLANTE_EVAL_HOST_BIN_DIR"
"""Names a directory that holds ``claude`` and ``opencode``; skips the cache and npm."""

REQUIRE_ENV = "ATLANTE_EVAL_REQUIRE_REAL_HOSTS"
"""Set to ``1`` to make unavailable hosts a test failure instead of a skip (CI)."""

INSTALL_ENV = "ATLANTE_EVAL_HOST_INSTALL"
"""Set to ``0`` to never run npm; missing hosts are then simply unavailable."""

INSTALL_TIMEOUT = 900.0
"""Seconds allowed for ``npm install`` (measured: 11-20 s, about 740 MB)."""


SAY_PREFIX = "atlante-eval tests:"
"""How the lines the install prints to the terminal begin."""


def say_on_stderr(line: str) -> None:
    """Print one line of the install's news on stderr."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


def engine_warnings(log: str) -> list[str]:
    """npm's warnings that Node is too old for a host (``npm warn EBADENGINE ...``)."""
    return [line for line in log.splitlines() if "EBADENGINE" in line]


class HostsUnavailableError(RuntimeError):
    """Raised by :func:`locate_hosts` when the CLIs are neither found nor installable."""


def default_cache_dir() -> Path:
    """Return the npm prefix the pinned hosts are installed into."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "atlante-eval" / "hosts"


def bin_dir_of(prefix: Path) -> Path:
    """Return the directory of executables of an npm prefix."""
    return prefix / "node_modules" / ".bin"


def missing_executables(bin_dir: Path) -> list[str]:
    """Return the host executables absent from ``bin_dir`` (or not executable)."""
    return [
        name
        for name in PACKAGES
        if not (bin_dir / name).is_file() or not os.access(bin_dir / name, os.X_OK)
    ]


def installed_versions(prefix: Path) -> dict[str, str | None]:
    """Return each host's version installed under ``prefix`` (None when absent)."""
    versions: dict[str, str | None] = {}
    for name, (package, _) in PACKAGES.items():
        manifest = prefix / "node_modules" / package / "package.json"
        try:
            versions[name] = json.loads(manifest.read_text())["version"]
        except (OSError, ValueError, KeyError):
            versions[name] = None
    return versions


def is_current(prefix: Path) -> bool:
    """Tell whether ``prefix`` holds exactly the pinned versions, with their executables."""
    pinned = {name: version for name, (_, version) in PACKAGES.items()}
    return installed_versions(prefix) == pinned and not missing_executables(bin_dir_of(prefix))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` so concurrent test runs install only once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with Path(path).open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install_hosts(
    prefix: Path,
    *,
    npm: str = "npm",
    timeout: float = INSTALL_TIMEOUT,
    say: Callable[[str], None] = say_on_stderr,
) -> Path:
    """Install the pinned hosts into ``prefix`` with npm and return their bin directory.

    The install goes to a staging folder first and is renamed into place only when it
    succeeded, so an interrupted install never leaves a half-populated cache. ``say``
    gets one line before the install and one after it, with npm's warnings that the
    installed Node is too old in between (the log keeps everything npm printed).

    Raises:
        HostsUnavailableError: npm failed, timed out, or installed other versions.
    """
    with _locked(prefix.parent / f".{prefix.name}.lock"):
        if is_current(prefix):
            return bin_dir_of(prefix)
        staging = prefix.parent / f".{prefix.name}.staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        specs = [f"{package}@{version}" for package, version in PACKAGES.values()]
        argv = [npm, "install", "--prefix", str(staging), "--no-audit", "--no-fund", *specs]
        log = staging.parent / f".{prefix.name}.install.log"
        pinned = " and ".join(f"{exe} {version}" for exe, (_, version) in PACKAGES.items())
        say(
            f"{SAY_PREFIX} installing the real hosts ({pinned}, about 740 MB, once) "
            f"into {prefix} with npm; log: {log}"
        )
        began = time.monotonic()
        try:
            with Path(log).open("w") as out:
                subprocess.run(
                    argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=True
                )
        except (OSError, subprocess.SubprocessError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            say(f"{SAY_PREFIX} installing the real hosts failed: {exc} (log: {log})")
            raise HostsUnavailableError(f"{' '.join(argv)} failed: {exc}\n{tail}") from exc
        for warning in engine_warnings(log.read_text(errors="replace")):
            say(warning)
        if not is_current(staging):
            found = installed_versions(staging)
            shutil.rmtree(staging, ignore_errors=True)
            raise HostsUnavailableError(f"npm installed {found}, expected the pinned {PACKAGES}")
        shutil.rmtree(prefix, ignore_errors=True)
        staging.rename(prefix)
        say(
            f"{SAY_PREFIX} installed {pinned} in {time.monotonic() - began:.0f} s; "
            f"the tests use {bin_dir_of(prefix)}"
        )
        return bin_dir_of(prefix)


def locate_hosts(
    *, install: bool | None = None, say: Callable[[str], None] = say_on_stderr
) -> Path:
    """Return a directory holding the real ``claude`` and ``opencode`` executables.

    Args:
        install: Whether npm may install the pinned versions into the cache; by default
            yes unless ``ATLANTE_EVAL_HOST_INSTALL=0``.
        say: Where an install prints its lines (:func:`install_hosts`).

    Raises:
        HostsUnavailableError: the hosts are not found and cannot be installed.
    """
    explicit = os.environ.get(BIN_DIR_ENV)
    if explicit:
        bin_dir = Path(explicit)
        missing = missing_executables(bin_dir)
        if missing:
            raise HostsUnavailableError(f"{BIN_DIR_ENV}={explicit} lacks {', '.join(missing)}")
        return bin_dir
    prefix = default_cache_dir()
    if is_current(prefix):
        return bin_dir_of(prefix)
    if install is None:
        install = os.environ.get(INSTALL_ENV, "1") != "0"
    npm = shutil.which("npm")
    if not install or npm is None:
        why = "npm is not on PATH" if npm is None else f"{INSTALL_ENV}=0"
        raise HostsUnavailableError(
            f"real hosts not installed in {prefix} and {why}; set {BIN_DIR_ENV} "
            "to a directory holding claude and opencode"
        )
    return install_hosts(prefix, npm=npm, say=say)
