"""The run's host at the version it is pinned to, or the host on PATH; resumes keep the pin.

:func:`host_pin` reads the pin (``--host-version`` over ``eval.hostVersion``),
checked against the host's supported range. :func:`run_host` creates the run's
host: with a pin, the built-in host on its copy in the managed host cache
(installed on first use, :func:`~atlante_eval.hosts.managed.pinned_host`), so a
host on PATH with another version is never used; without one, the host on PATH as
before. :func:`check_pinned_version` refuses a probed version that is not the pin,
and :func:`check_resumed_host` a ``--resume`` whose earlier run ran another
version when either run was pinned.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from .._util.versions import is_exact_version
from ..diagnostics import DiagnosticError, error
from ..hosts import Host, create_host
from ..project.config import EvalConfig
from ..project.pins import EXACT_VERSION, pin_error
from ..report import REPORT_FILE, HostSource, ProgressEvent, RunReport
from .engine import call_sink
from .journal import JOURNAL_NAME

__all__ = [
    "RunHost",
    "check_pinned_version",
    "check_resumed_host",
    "host_pin",
    "pin_option",
    "run_host",
]


def pin_option(value: object) -> str | None:
    """Check ``--host-version``'s form; its range needs the host (:func:`host_pin`).

    Raises:
        DiagnosticError: ``invalid-host-version`` (exit 2).
    """
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else ""
    if is_exact_version(text):
        return text
    raise DiagnosticError(
        [
            error(
                "invalid-host-version",
                f"--host-version must be {EXACT_VERSION}, got {value!r}",
                expected=EXACT_VERSION,
                next="pass the exact version to run (see docs/hosts.md, Pinning)",
            )
        ]
    )


def host_pin(requested: str | None, project_eval: EvalConfig) -> str | None:
    """The run's pin: ``--host-version`` over ``eval.hostVersion`` (``None``: the host on PATH).

    Raises:
        DiagnosticError: ``invalid-host-version`` when ``--host-version`` is outside
            the host's supported range (exit 2; the configuration's own pin was
            checked when the project loaded).
    """
    if requested is None:
        return project_eval.host_version
    problem = pin_error(project_eval.host, requested, what="--host-version")
    if problem is not None:
        raise DiagnosticError([problem])
    return requested


@dataclass(frozen=True, slots=True)
class RunHost:
    """The run's host, unprobed, and what the report says of where it came from."""

    host: Host
    pin: str | None
    """The pinned version, if any."""
    source: HostSource | None
    """A managed copy's source; a PATH host's is known once probed (:meth:`probed_source`)."""

    def probed_source(self) -> HostSource | None:
        """``meta.hostSource``: the managed copy, or the probed executable on PATH."""
        if self.source is not None:
            return self.source
        executable = getattr(self.host, "executable", None)
        return HostSource(kind="path", executable=executable) if executable else None


async def run_host(
    given: Host | None,
    project_eval: EvalConfig,
    pin: str | None,
    *,
    on_event: Callable[[ProgressEvent], object] | None,
    leases: ExitStack,
) -> RunHost:
    """Create the run's host: ``given``, the pinned managed copy, or the host on PATH.

    A pinned copy is installed first when missing or corrupted (progress goes to
    ``on_event``); its lease is held until ``leases`` closes.

    Raises:
        DiagnosticError: ``eval-host-install-failed`` (exit 3).
    """
    if given is not None:
        return RunHost(given, pin, None)
    if pin is None:
        return RunHost(create_host(project_eval.host), None, None)
    from ..hosts.managed import pinned_host

    async def progress(event: ProgressEvent) -> None:
        await call_sink(on_event, event)

    pinned = await pinned_host(project_eval.host, pin, on_progress=progress)
    leases.callback(pinned.lease.close)
    return RunHost(pinned.host, pin, pinned.cached.source())


def check_pinned_version(ready: RunHost) -> None:
    """Refuse a probed host whose version is not the pinned one.

    Raises:
        DiagnosticError: ``eval-host-unsupported-version`` (exit 3).
    """
    if ready.pin is None or ready.host.version == ready.pin:
        return
    managed = ready.source is not None
    raise DiagnosticError(
        [
            error(
                "eval-host-unsupported-version",
                f"{ready.host.name} reports version {ready.host.version}, but the run is "
                f"pinned to {ready.pin}",
                expected=ready.pin,
                next=(
                    f"reinstall it: `atlante-eval hosts remove {ready.host.name}@{ready.pin}`, "
                    "then run again"
                    if managed
                    else "give a host of the pinned version, or drop the pin"
                ),
            )
        ]
    )


def _earlier_host(run_dir: Path) -> tuple[str | None, HostSource | None]:
    """The host version and source an earlier run recorded (journal header, else report)."""
    try:
        with (run_dir / JOURNAL_NAME).open(encoding="utf-8") as handle:
            header = json.loads(handle.readline())
        source = header.get("hostSource")
        return header.get("hostVersion"), (
            HostSource.model_validate(source) if isinstance(source, dict) else None
        )
    except (OSError, ValueError, AttributeError):
        pass
    try:
        meta = RunReport.model_validate_json((run_dir / REPORT_FILE).read_bytes()).meta
    except (OSError, ValueError):
        return None, None
    return meta.host_version, meta.host_source


def check_resumed_host(run_dir: Path, host: Host, source: HostSource | None) -> None:
    """Refuse to resume a run that ran another host version, when either run was pinned.

    Raises:
        DiagnosticError: ``eval-resume-mismatch`` (exit 2).
    """
    version, earlier = _earlier_host(run_dir)
    pinned = any(s is not None and s.kind == "managed" for s in (earlier, source))
    if not pinned or version is None or host.version is None or version == host.version:
        return
    how = "pinned" if earlier is not None and earlier.kind == "managed" else "from PATH"
    raise DiagnosticError(
        [
            error(
                "eval-resume-mismatch",
                f"cannot resume {run_dir}: it ran {host.name} {version} ({how}), and this run "
                f"would run {host.version}",
                source=str(run_dir),
                expected=f"{host.name} {version}",
                next=f"resume with --host-version {version}, or start a new run without --resume",
            )
        ]
    )
