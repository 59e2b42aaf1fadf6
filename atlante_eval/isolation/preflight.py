"""Check, before any trial, that ``os`` isolation can work on this machine.

Never a silent fallback: when bubblewrap is missing, the platform is not Linux,
or the kernel refuses the namespaces, the run stops with
``eval-isolation-unavailable`` (exit 3) saying what is missing and how to fix it.
The check runs a trivial command through the very confinement trials use.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import anyio

from ..choices import IsolationMode
from ..diagnostics import DiagnosticError, error
from .bwrap import Confinement

__all__ = ["preflight_isolation", "require_os_isolation"]

_PROBE_TIMEOUT_S = 30.0
_INSTALL = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap), or run with --isolation none"
)
_ENABLE = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
    "on Ubuntu 24.04+ also kernel.apparmor_restrict_unprivileged_userns=0; "
    "user.max_user_namespaces > 0; in a container, allow unshare/CLONE_NEWUSER), "
    "or run with --isolation none"
)
_passed: set[str] = set()


def _unavailable(message: str, next_step: str, cause: str | None = None) -> DiagnosticError:
    details = {"cause": cause} if cause else {}
    return DiagnosticError(
        [error("eval-isolation-unavailable", message, next=next_step, **details)]
    )


def require_os_isolation(
    *, env: Mapping[str, str] | None = None, platform: str | None = None
) -> str:
    """Return the ``bwrap`` path after proving a confined command runs here.

    Args:
        env: where ``PATH`` is read from (default: the process environment).
        platform: ``sys.platform`` to judge (tests).

    Raises:
        DiagnosticError: ``eval-isolation-unavailable`` (exit 3).
    """
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        raise _unavailable(
            f"--isolation os needs Linux namespaces; this platform is {platform}",
            "run with --isolation none on this machine, or run the suite inside a Linux VM "
            "or container (see docs/isolation.md)",
        )
    search = env.get("PATH") if env is not None else None
    bwrap = shutil.which("bwrap", path=search)
    if bwrap is None:
        raise _unavailable(
            "--isolation os needs bubblewrap (bwrap), which is not on PATH", _INSTALL
        )
    if bwrap in _passed:
        return bwrap
    with tempfile.TemporaryDirectory(prefix="atlante-isolation-probe-") as scratch:
        root = Path(scratch)
        confine = Confinement(bwrap=bwrap, state_dir=root, writable=(root,))
        command = confine(["/bin/sh", "-c", "exit 0"], root, {"PATH": "/usr/bin:/bin"})
        try:
            result = subprocess.run(
                command.argv,
                env=command.env,
                cwd=root,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
                pass_fds=command.pass_fds,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise _unavailable(
                "bubblewrap could not start a confined process", _ENABLE, cause=str(exc)
            ) from None
        finally:
            if command.after_exit is not None:
                command.after_exit()  # closes the seccomp program's pipe
    if result.returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip()[-400:]
        raise _unavailable(
            "bubblewrap cannot create the namespaces a trial needs (user, mount, PID, network)",
            _ENABLE,
            cause=tail or f"bwrap exited {result.returncode}",
        )
    _passed.add(bwrap)
    return bwrap


async def preflight_isolation(mode: IsolationMode) -> str | None:
    """Return the proven ``bwrap`` path for ``os`` isolation, ``None`` for ``none``.

    Raises:
        DiagnosticError: ``eval-isolation-unavailable`` (exit 3), before any trial.
    """
    if mode != "os":
        return None
    return await anyio.to_thread.run_sync(require_os_isolation)
