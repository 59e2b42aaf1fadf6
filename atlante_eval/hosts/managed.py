"""Run a host at an exact version: install it into the managed host cache, check it, share it.

:func:`pinned_host` is "run this host at version X" as one function of the
version: the copy in the cache (:mod:`.cache`) is checked on every use and, when
missing or corrupted, installed with npm from the registry the machine is
configured for (``npm install --prefix <staging> @anthropic-ai/claude-code@X``;
npm checks the tarball against the registry's integrity), into a staging folder
moved into place only once complete. An exclusive ``flock`` on the version's
install lock makes concurrent runs and shards install once (the others wait, then
find it installed); every process that runs the version holds its use lock
shared, so ``hosts remove`` never removes a copy under a running run.
"""

from __future__ import annotations

import errno
import fcntl
import inspect
import os
import re
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from .._util.fstree import remove_tree
from ..diagnostics import DiagnosticError, error
from ..report import HostInstallProgress, utc_timestamp
from ..report.events import InstallStage
from ..trial import ProcessResult, run_process
from .base import Host, secret_values
from .cache import (
    RECORD_FILE,
    CachedHost,
    CacheLayout,
    CacheRecord,
    HostPin,
    check_entry,
    host_cache_root,
    lock_integrity,
    parse_pin,
    scan_cache,
    tree_digest,
)
from .registry import create_host
from .versions import find_executable

__all__ = [
    "INSTALL_TIMEOUT_S",
    "HostLease",
    "InstallProgressSink",
    "PinnedHost",
    "cached_host",
    "ensure_installed",
    "install_host",
    "list_hosts",
    "pinned_host",
    "remove_host",
]

#: How long one ``npm install`` of a host may take (the packages are hundreds of MB).
INSTALL_TIMEOUT_S = 1800.0
#: How often a process waiting for another's install tries the lock again.
LOCK_POLL_S = 0.2

#: Called (sync or async) with each :class:`HostInstallProgress`.
InstallProgressSink = Callable[[HostInstallProgress], object]


class HostLease:
    """A shared hold on one cached version while a process runs it (``hosts remove`` waits)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def close(self) -> None:
        """Release the hold."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass(frozen=True, slots=True)
class PinnedHost:
    """A built-in host created on its checked copy in the managed cache."""

    host: Host
    """The host, unprobed, whose executable is the cached copy's."""
    cached: CachedHost
    """The copy it runs, as checked."""
    lease: HostLease
    """Held until the caller is done with the copy; close it then."""
    installed: bool
    """Whether this call installed (or reinstalled) the copy."""


async def _notify(sink: InstallProgressSink | None, event: HostInstallProgress) -> None:
    if sink is None:
        return
    outcome = sink(event)
    if inspect.isawaitable(outcome):
        await outcome


def _try_lock(path: Path, operation: int) -> int | None:
    """Open ``path`` and ``flock`` it without waiting; ``None`` when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise
    return fd


async def _acquire(
    path: Path, operation: int, on_wait: Callable[[], Awaitable[None]] | None = None
) -> int:
    """Lock ``path``, polling (cancellably) while another process holds it."""
    fd = _try_lock(path, operation)
    if fd is None and on_wait is not None:
        await on_wait()
    while fd is None:
        await anyio.sleep(LOCK_POLL_S)
        fd = _try_lock(path, operation)
    return fd


def _progress(
    layout: CacheLayout,
    stage: InstallStage,
    *,
    command: str | None = None,
    reason: str | None = None,
    record: CacheRecord | None = None,
    elapsed_ms: int | None = None,
) -> HostInstallProgress:
    return HostInstallProgress(
        host=layout.pin.host,
        version=layout.pin.version,
        stage=stage,
        directory=str(layout.directory),
        command=command,
        reason=reason,
        size_bytes=record.size_bytes if record is not None else None,
        integrity=record.integrity if record is not None else None,
        elapsed_ms=elapsed_ms,
    )


def install_failed(pin: HostPin, directory: Path, cause: str) -> DiagnosticError:
    """``eval-host-install-failed`` (exit 3), naming the command that installs the version."""
    return DiagnosticError(
        [
            error(
                "eval-host-install-failed",
                f"could not install {pin.host} {pin.version} ({pin.spec}) into the host "
                f"cache at {directory}",
                cause=cause,
                next=f"check the network and the registry npm uses (`npm config get "
                f"registry`), then run `atlante-eval hosts install {pin}`; without a network, "
                f"install it where the registry is reachable and copy {directory} to the same "
                "place here (docs/hosts.md, Offline use)",
            )
        ]
    )


async def ensure_installed(
    pin: HostPin,
    *,
    root: Path,
    env: Mapping[str, str],
    on_progress: InstallProgressSink | None = None,
) -> tuple[CachedHost, HostLease, bool]:
    """Check ``pin``'s copy in ``root``, installing it when missing or corrupted.

    Returns:
        The checked copy, a lease on it (close it when done), and whether it was
        installed now.

    Raises:
        DiagnosticError: ``eval-host-install-failed`` (exit 3).
    """
    layout = CacheLayout(root, pin)
    try:
        layout.install_lock.parent.mkdir(parents=True, exist_ok=True)
        lock = await _acquire(
            layout.install_lock,
            fcntl.LOCK_EX,
            lambda: _notify(on_progress, _progress(layout, "waiting")),
        )
    except OSError as exc:
        raise install_failed(pin, layout.directory, f"the cache is not writable: {exc}") from None
    try:
        cached = await anyio.to_thread.run_sync(check_entry, layout)
        installed = not cached.ok
        if installed:
            cached = await _install(layout, env, cached.problem, on_progress)
        lease = HostLease(await _acquire(layout.use_lock, fcntl.LOCK_SH))
    finally:
        os.close(lock)
    return cached, lease, installed


def _npm_argv(npm: str, staging: Path, pin: HostPin) -> list[str]:
    return [
        npm,
        "install",
        "--prefix",
        str(staging),
        "--no-audit",
        "--no-fund",
        "--save-exact",
        "--loglevel=error",
        pin.spec,
    ]


async def _install(
    layout: CacheLayout,
    env: Mapping[str, str],
    reason: str | None,
    on_progress: InstallProgressSink | None,
) -> CachedHost:
    """Install ``layout``'s version with npm into a staging folder, then move it into place."""
    pin = layout.pin
    npm = find_executable("npm", env)
    if npm is None:
        raise install_failed(
            pin, layout.directory, "npm (Node.js's package manager) was not found on PATH"
        )
    staging = layout.directory.with_name(f".{pin.version}.staging-{secrets.token_hex(6)}")
    argv = _npm_argv(npm, staging, pin)
    command = shlex.join(["npm", *argv[1:]])
    await _notify(on_progress, _progress(layout, "installing", command=command, reason=reason))
    started = time.monotonic()
    try:
        staging.mkdir()
        result = await run_process(argv, cwd=staging, env=env, timeout_s=INSTALL_TIMEOUT_S)
        failure = _npm_failure(result, env)
        if failure is not None:
            raise install_failed(pin, layout.directory, failure)
        cached = await anyio.to_thread.run_sync(_move_into_place, layout, staging)
    except OSError as exc:  # the cache cannot be written (full, read-only, permissions)
        raise install_failed(pin, layout.directory, f"the cache cannot be written: {exc}") from None
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(remove_tree, staging)
    elapsed = int((time.monotonic() - started) * 1000)
    await _notify(
        on_progress, _progress(layout, "installed", record=cached.record, elapsed_ms=elapsed)
    )
    return cached


def _npm_failure(result: ProcessResult, env: Mapping[str, str]) -> str | None:
    """Why npm failed, in words (its stderr's end, secrets redacted); ``None`` if it did not."""
    if result.spawn_error:
        return f"npm could not start: {result.spawn_error}"
    if result.timed_out:
        return f"npm did not finish within {INSTALL_TIMEOUT_S / 60:.0f} minutes"
    if result.returncode == 0:
        return None
    words = _npm_words(result.stderr.strip() or result.stdout.strip()) or "no output"
    for secret in secret_values(env):
        if len(secret) >= 4:
            words = words.replace(secret, "***")
    return f"npm exited {result.returncode}: {words}"


_NPM_PREFIX = re.compile(r"^npm (?:error|ERR!) ?")
#: A field of the error object npm prints after the message (``errno: 'ECONNREFUSED',``).
_NPM_FIELD = re.compile(r"^\w+: .*,$")


def _npm_words(output: str) -> str:
    """npm's error lines without their prefix and stack frames, and where its log is."""
    kept: list[str] = []
    for raw in output.splitlines():
        line = _NPM_PREFIX.sub("", raw).strip()
        if line.startswith("at ") or line in ("", "{", "}") or _NPM_FIELD.match(line):
            continue
        kept.append(line)
    log = [line for line in kept if "complete log of this run" in line]
    shown = [line for line in kept if line not in log][:8]
    return "\n".join([*shown, *log])[-1500:]


def _move_into_place(layout: CacheLayout, staging: Path) -> CachedHost:
    """Record the finished install in ``staging`` and rename it to the version's directory.

    Raises:
        DiagnosticError: npm installed something else, or no executable.
    """
    pin = layout.pin
    version, integrity = lock_integrity(staging, pin)
    if version != pin.version or not integrity:
        raise install_failed(
            pin,
            layout.directory,
            f"npm's lock file does not record {pin.spec} with an integrity (found {version})",
        )
    executable = Path("node_modules", ".bin", pin.command)
    if not os.access(staging / executable, os.X_OK):
        raise install_failed(
            pin, layout.directory, f"the package installed no executable {executable}"
        )
    digest, size = tree_digest(staging)
    record = CacheRecord(
        host=pin.host,
        version=pin.version,
        package=pin.package,
        integrity=integrity,
        executable=executable.as_posix(),
        tree_digest=digest,
        size_bytes=size,
        installed_at=utc_timestamp(),
    )
    _write_record(staging / RECORD_FILE, record)
    aside = layout.directory.with_name(f".{pin.version}.old-{secrets.token_hex(6)}")
    if layout.directory.exists() or layout.directory.is_symlink():
        layout.directory.rename(aside)
    staging.rename(layout.directory)
    remove_tree(aside)
    return CachedHost(
        host=pin.host,
        version=pin.version,
        directory=layout.directory,
        executable=layout.executable,
        state="ok",
        record=record,
    )


def _write_record(path: Path, record: CacheRecord) -> None:
    data = (record.model_dump_json(by_alias=True, indent=2) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


async def pinned_host(
    name: str,
    version: str,
    *,
    env: Mapping[str, str] | None = None,
    cache: Path | str | None = None,
    on_progress: InstallProgressSink | None = None,
) -> PinnedHost:
    """Ready the built-in host ``name`` at exactly ``version`` from the managed cache.

    Installs the version on first use (and reinstalls a copy that fails its
    integrity check), then creates the host on the cached executable. The host is
    not probed. Close the returned lease once the copy is no longer run.

    Args:
        name: ``claude-code`` or ``opencode``.
        version: the exact version (``2.1.332``).
        env: the parent environment (default ``os.environ``): npm runs with it and it
            locates the cache.
        cache: the cache root (default ``$ATLANTE_EVAL_HOST_CACHE``, else the user's).
        on_progress: called with each install step (sync or async).

    Raises:
        DiagnosticError: ``invalid-host-version`` / ``invalid-option`` (exit 2) or
            ``eval-host-install-failed`` (exit 3).
    """
    source = dict(os.environ if env is None else env)
    pin = parse_pin(f"{name}@{version}")
    root = _root(cache, source)
    cached, lease, installed = await ensure_installed(
        pin, root=root, env=source, on_progress=on_progress
    )
    host = create_host(pin.host, binary=str(cached.executable))
    return PinnedHost(host=host, cached=cached, lease=lease, installed=installed)


async def install_host(
    name: str,
    version: str,
    *,
    cache: Path | str | None = None,
    on_progress: InstallProgressSink | None = None,
) -> tuple[CachedHost, bool]:
    """Install ``name`` at ``version`` into the managed cache (``hosts install``).

    Returns:
        The checked copy, and whether it was installed now (``False``: it was
        already cached and passed its integrity check).

    Raises:
        DiagnosticError: as :func:`pinned_host`.
    """
    pinned = await pinned_host(name, version, cache=cache, on_progress=on_progress)
    pinned.lease.close()
    return pinned.cached, pinned.installed


def _root(cache: Path | str | None, env: Mapping[str, str] | None = None) -> Path:
    """The cache root: ``cache`` when given, else the environment's."""
    return Path(cache).absolute() if cache is not None else host_cache_root(env)


def list_hosts(cache: Path | str | None = None) -> list[CachedHost]:
    """Every version in the managed cache, each checked (``hosts list``; reads every file)."""
    return scan_cache(_root(cache))


def cached_host(name: str, version: str, *, cache: Path | str | None = None) -> CachedHost:
    """One version in the managed cache, checked (``hosts path``); ``state`` says if it is there.

    Raises:
        DiagnosticError: ``invalid-host-version`` / ``invalid-option`` (exit 2).
    """
    return check_entry(CacheLayout(_root(cache), parse_pin(f"{name}@{version}")))


def remove_host(name: str, version: str, *, cache: Path | str | None = None) -> bool:
    """Remove one version from the managed cache (``hosts remove``); ``False`` if absent.

    Raises:
        DiagnosticError: ``eval-host-in-use`` (exit 3) while a process installs,
            checks or runs that version; ``invalid-host-version`` (exit 2).
    """
    layout = CacheLayout(_root(cache), parse_pin(f"{name}@{version}"))
    if not layout.directory.exists() and not layout.directory.is_symlink():
        return False
    lock = _try_lock(layout.install_lock, fcntl.LOCK_EX)
    if lock is None:
        raise _in_use(layout, "another process is installing or checking it")
    try:
        use = _try_lock(layout.use_lock, fcntl.LOCK_EX)
        if use is None:
            raise _in_use(layout, "a running atlante-eval process is using it")
        try:
            aside = layout.directory.with_name(
                f".{layout.pin.version}.removing-{secrets.token_hex(6)}"
            )
            layout.directory.rename(aside)
            failed = remove_tree(aside)
        finally:
            os.close(use)
    finally:
        os.close(lock)
    if failed is not None:
        raise DiagnosticError(
            [
                error(
                    "eval-host-in-use",
                    f"could not remove {failed.path}: {failed.reason}",
                    next=f"remove {aside} by hand",
                )
            ]
        )
    return True


def _in_use(layout: CacheLayout, why: str) -> DiagnosticError:
    return DiagnosticError(
        [
            error(
                "eval-host-in-use",
                f"{layout.pin.host} {layout.pin.version} was not removed: {why}",
                source=str(layout.directory),
                next="wait for that run to finish, then remove it again",
            )
        ]
    )
