"""Find a host executable, read its ``--version`` and check it against semver ranges.

Both hosts print their version as the first word of ``<bin> --version``
(``1.18.33``, ``2.1.332 (Claude Code)``). The probe runs once per run, with the
full parent environment, before any trial; every failure is a run-level
diagnostic (exit 3).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import semver

from .._util.versions import VersionRange, parse_version
from ..diagnostics import DiagnosticError, error
from ..trial import run_process

__all__ = [
    "PROBE_TIMEOUT_S",
    "VersionRange",
    "find_executable",
    "find_unexecutable",
    "parse_version",
    "probe_version",
]

#: How long ``<bin> --version`` (and other probes) may take.
PROBE_TIMEOUT_S = 60.0


def find_executable(binary: str, env: Mapping[str, str] | None = None) -> str | None:
    """Return the absolute path of ``binary`` (a name looked up on PATH, or a path)."""
    source = os.environ if env is None else env
    if os.sep in binary:
        path = Path(binary).absolute()
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(binary, path=source.get("PATH", os.defpath))
    return str(Path(found).absolute()) if found else None


def find_unexecutable(binary: str, env: Mapping[str, str] | None = None) -> str | None:
    """Return the first ``binary`` on PATH (or the path) that is a file but not executable."""
    source = os.environ if env is None else env
    if os.sep in binary:
        candidates = [Path(binary).absolute()]
    else:
        directories = source.get("PATH", os.defpath).split(os.pathsep)
        candidates = [Path(d or ".").absolute() / binary for d in directories]
    for candidate in candidates:
        if candidate.is_file() and not os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _unavailable(binary: str, cause: str, next_step: str) -> DiagnosticError:
    return DiagnosticError(
        [
            error(
                "eval-host-unavailable",
                f"could not run {binary} --version",
                cause=cause,
                next=next_step,
            )
        ]
    )


async def probe_version(
    binary: str,
    *,
    label: str,
    ranges: Sequence[VersionRange],
    install_hint: str,
    env: Mapping[str, str] | None = None,
) -> tuple[str, semver.Version, VersionRange]:
    """Locate ``binary``, run ``--version`` and match the result against ``ranges``.

    Args:
        binary: executable name (looked up on PATH) or path.
        label: the host's name for messages (``opencode``, ``claude-code``).
        ranges: the supported ranges, in order.
        install_hint: what to do when the executable is missing.
        env: the environment to run the probe with (default: ``os.environ``).

    Returns:
        The executable's absolute path, its version, and the range that matched.

    Raises:
        DiagnosticError: ``eval-host-unavailable`` when the executable is missing,
            fails, or prints no version; ``eval-host-unsupported-version`` when the
            version is outside every range.
    """
    source = dict(os.environ if env is None else env)
    path = find_executable(binary, source)
    if path is None:
        blocked = find_unexecutable(binary, source)
        if blocked is not None:
            raise _unavailable(
                binary,
                f"{blocked} exists but is not executable",
                f"make it executable (chmod +x {blocked}) or put a working {binary} "
                "earlier on PATH",
            )
        raise _unavailable(binary, f"{binary} was not found on PATH", install_hint)
    result = await run_process(
        [path, "--version"], cwd=Path.cwd(), env=source, timeout_s=PROBE_TIMEOUT_S
    )
    if result.spawn_error or result.timed_out or result.returncode != 0:
        cause = (
            result.spawn_error
            or ("timed out" if result.timed_out else None)
            or f"exit {result.returncode}: {result.stderr.strip()[-400:] or 'no stderr output'}"
        )
        raise _unavailable(binary, cause, install_hint)
    version = parse_version(result.stdout)
    expected = " or ".join(f"{r.name} {r.spec}" if len(ranges) > 1 else r.spec for r in ranges)
    if version is None:
        shown = result.stdout.strip()[:80] or "nothing"
        raise DiagnosticError(
            [
                error(
                    "eval-host-unavailable",
                    f"could not read the version printed by {binary} --version: {shown!r}",
                    expected=f"a version MAJOR.MINOR.PATCH, supported: {expected}",
                    next=install_hint,
                )
            ]
        )
    for candidate in ranges:
        if candidate.contains(version):
            return path, version, candidate
    raise DiagnosticError(
        [
            error(
                "eval-host-unsupported-version",
                f"{label} {version} is not supported",
                expected=expected,
                next=f"install a supported {label} version and run again",
            )
        ]
    )
