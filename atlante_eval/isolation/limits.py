"""Per-trial resource limits: resolved once per run, enforced for every process of a trial.

``eval.limits`` and ``run --limit`` resolve to :class:`ResourceLimits`
(:func:`resolve_limits`; defaults under ``os`` only). :func:`preflight_limits`
proves, before any trial, that this machine lets the engine create groups with
the controllers they need (cgroup v2, else v1; :mod:`.cgroups`), or stops the
run with ``eval-limits-unavailable`` (exit 3). During the run
(:func:`run_limit_groups`) each trial gets its own group
(:func:`open_trial_limits`), and every process its session, setup and checks
start joins it before it runs its program: the spawn goes through ``/bin/sh``,
which writes its own pid into the group's ``cgroup.procs`` files and then
``exec``\\s the program (under ``os``, bubblewrap), so every child is born
inside. Before each spawn the group's event counters are read, and again once
the process has ended: a limit reached in between is recorded for that phase
(with, under ``os``, a full private tmpfs, :mod:`.tmpfs`), and
:func:`with_limits` makes it the trial's cause. When the trial ends, every
process left in its group is killed and the group removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeGuard

import anyio

from .._util.logs import get_logger
from ..diagnostics import DiagnosticError, error
from ..project.config import IsolationMode, LimitsConfig
from ..report import LimitReached, LimitsRecord, TrialResult
from ..trial import SandboxError, SpawnPlan

if TYPE_CHECKING:  # the groups' machinery loads when a run limits something
    from .cgroups import CgroupVersion, Counters, GroupLimits, TrialGroup
    from .hierarchies import Hierarchy
    from .tmpfs import TmpfsWatch

__all__ = [
    "OS_DEFAULTS",
    "LimitSettings",
    "Phase",
    "ResourceLimits",
    "TrialLimits",
    "limited",
    "open_trial_limits",
    "preflight_limits",
    "resolve_limits",
    "run_limit_groups",
    "with_limits",
]

Phase = Literal["session", "setup", "check"]
#: The limits ``--isolation os`` applies to each trial unless configured otherwise.
OS_DEFAULTS = LimitsConfig(memory_mb=4096, pids=4096, tmp_mb=1024)
_MIB = 1024 * 1024
#: Exit status of the join step when the group cannot be joined (the program never ran).
JOIN_FAILED = 125
#: Writes its pid into each group file named before ``--``, then becomes the program.
_JOIN = (
    'while [ "$1" != -- ]; do '
    'echo $$ > "$1" || { echo "atlante-eval: cannot join the trial\'s control group" >&2; '
    f'exit {JOIN_FAILED}; }}; shift; done; shift; exec "$@"'
)
_UNAVAILABLE_NEXT = (
    "run as root, or inside a cgroup v2 subtree delegated to you "
    "(systemd-run --user --scope -p Delegate=yes atlante-eval run ...), "
    'or turn these limits off: {flags}, or "unlimited" in eval.limits '
    "(docs/isolation.md#resource-limits)"
)

log = get_logger("atlante_eval.isolation.limits")


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """The limits every trial of a run gets (``None``: not limited)."""

    memory_mb: int | None = None
    pids: int | None = None
    cpus: float | None = None
    tmp_mb: int | None = None

    def group_limits(self) -> GroupLimits:
        """What the trial's control group enforces."""
        from .cgroups import CPU_PERIOD_US, GroupLimits

        return GroupLimits(
            memory_bytes=self.memory_mb * _MIB if self.memory_mb is not None else None,
            pids=self.pids,
            cpu_quota_us=max(1000, round(self.cpus * CPU_PERIOD_US)) if self.cpus else None,
        )

    @property
    def any(self) -> bool:
        """Whether anything is limited."""
        return any(v is not None for v in (self.memory_mb, self.pids, self.cpus, self.tmp_mb))


def limited(settings: LimitSettings | None) -> TypeGuard[LimitSettings]:
    """Whether a run with ``settings`` (``None``: none) limits anything in its trials."""
    return settings is not None and settings.limits.any


def resolve_limits(
    mode: IsolationMode | str, config: LimitsConfig, override: LimitsConfig | None = None
) -> ResourceLimits:
    """The run's limits: ``--limit`` over ``eval.limits`` over the ``os`` defaults.

    ``"unlimited"`` turns a limit off; ``tmpMb`` applies under ``os`` only (under
    ``none`` a trial's ``/tmp`` is the machine's).
    """
    layers = [layer for layer in (override, config) if layer is not None]
    if mode == "os":
        layers.append(OS_DEFAULTS)

    def pick(name: str) -> int | float | None:
        for layer in layers:
            value = getattr(layer, name)
            if value is not None:
                return None if value == "unlimited" else value
        return None

    memory, pids, cpus, tmp = (pick(n) for n in ("memory_mb", "pids", "cpus", "tmp_mb"))
    return ResourceLimits(
        memory_mb=int(memory) if memory is not None else None,
        pids=int(pids) if pids is not None else None,
        cpus=float(cpus) if cpus is not None else None,
        tmp_mb=int(tmp) if tmp is not None and mode == "os" else None,
    )


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """A run's limits and the hierarchy (``None``: no control group needed) they live in."""

    limits: ResourceLimits
    hierarchy: Hierarchy | None = field(default=None, compare=False)

    @property
    def cgroup(self) -> CgroupVersion | None:
        """``v2`` or ``v1``: where the groups are made (``None``: none)."""
        return self.hierarchy.version if self.hierarchy is not None else None

    def describe(self) -> str:
        """``per-trial limits memoryMb 4096, pids 4096, tmpMb 1024 (cgroup v1)``, or none."""
        limits = self.limits
        named = [
            f"{key} {value:g}" if isinstance(value, float) else f"{key} {value}"
            for key, value in (
                ("memoryMb", limits.memory_mb),
                ("pids", limits.pids),
                ("cpus", limits.cpus),
                ("tmpMb", limits.tmp_mb),
            )
            if value is not None
        ]
        if not named:
            return "no per-trial resource limits"
        where = f" (enforced with cgroup {self.cgroup})" if self.cgroup else ""
        return f"per-trial limits {', '.join(named)}{where}"

    def record(self) -> LimitsRecord | None:
        """``meta.limits`` (``None`` when nothing is limited)."""
        if not self.limits.any:
            return None
        limits = self.limits
        return LimitsRecord(
            memory_mb=limits.memory_mb,
            pids=limits.pids,
            cpus=limits.cpus,
            tmp_mb=limits.tmp_mb,
            cgroup=self.cgroup,
        )


def _flags(limits: ResourceLimits) -> str:
    names = [
        flag
        for flag, value in (("memoryMb", limits.memory_mb), ("pids", limits.pids))
        if value is not None
    ] + (["cpus"] if limits.cpus is not None else [])
    return " ".join(f"--limit {name}=unlimited" for name in names)


def _probe(limits: ResourceLimits) -> LimitSettings:
    """Find the hierarchy and prove a group with ``limits`` can be made and removed there."""
    from .cgroups import CgroupUnavailable
    from .hierarchies import find_hierarchy

    wanted = limits.group_limits()
    controllers = wanted.controllers()
    if not controllers:
        return LimitSettings(limits)
    try:
        hierarchy = find_hierarchy(controllers)
        hierarchy.open()
    except CgroupUnavailable as exc:
        raise _unavailable(limits, exc.reasons) from None
    try:
        group = hierarchy.create(f"probe-{secrets.token_hex(4)}", wanted)
        group.remove()
    except OSError as exc:
        raise _unavailable(limits, [f"cgroup {hierarchy.version}: {exc}"]) from None
    finally:
        hierarchy.close()
    return LimitSettings(limits, hierarchy)


def _unavailable(limits: ResourceLimits, reasons: Sequence[str]) -> DiagnosticError:
    asked = ", ".join(
        f"{name} {value}"
        for name, value in (("memoryMb", limits.memory_mb), ("pids", limits.pids))
        if value is not None
    )
    if limits.cpus is not None:
        asked = f"{asked}, cpus {limits.cpus:g}".lstrip(", ")
    return DiagnosticError(
        [
            error(
                "eval-limits-unavailable",
                f"the per-trial resource limits ({asked}) need control groups that this "
                "user cannot create here",
                cause="; ".join(reasons),
                next=_UNAVAILABLE_NEXT.format(flags=_flags(limits)),
            )
        ]
    )


async def preflight_limits(limits: ResourceLimits) -> LimitSettings:
    """Prove, before any trial, that ``limits`` can be enforced on this machine.

    Raises:
        DiagnosticError: ``eval-limits-unavailable`` (exit 3): neither a cgroup v2
            subtree with the controllers nor writable v1 hierarchies.
    """
    if not limits.any or os.name != "posix" or not limits.group_limits().controllers():
        return LimitSettings(limits)
    return await anyio.to_thread.run_sync(_probe, limits)


@contextlib.asynccontextmanager
async def run_limit_groups(settings: LimitSettings | None) -> AsyncIterator[None]:
    """Hold the run group of ``settings`` for the block (its trials' groups go below it).

    Raises:
        DiagnosticError: ``eval-limits-unavailable``: the groups cannot be made after all.
    """
    hierarchy = settings.hierarchy if settings is not None else None
    if hierarchy is None or settings is None:
        yield
        return
    from .cgroups import CgroupUnavailable

    try:
        await anyio.to_thread.run_sync(hierarchy.open)
    except CgroupUnavailable as exc:
        raise _unavailable(settings.limits, exc.reasons) from None
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            problem = await anyio.to_thread.run_sync(hierarchy.close)
            if problem is not None:
                log.warning("limits.cleanup-failed", problem=problem)


class TrialLimits:
    """One trial's limits: its group, the spawns that join it, what they reached."""

    def __init__(self, limits: ResourceLimits, group: TrialGroup | None) -> None:
        self.limits = limits
        self.group = group
        self._reached: dict[tuple[Phase, str], LimitReached] = {}

    @property
    def tmp_bytes(self) -> int | None:
        """The size of each private tmpfs under ``os`` (``None``: the kernel's default)."""
        return self.limits.tmp_mb * _MIB if self.limits.tmp_mb is not None else None

    def reached(self) -> list[LimitReached]:
        """Each limit reached, by phase, in the order they were seen."""
        return list(self._reached.values())

    def plan(
        self,
        phase: Phase,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        *,
        confined: bool,
    ) -> SpawnPlan:
        """The spawn of ``argv`` (under ``os``: the bubblewrap command) inside the trial's limits.

        Raises:
            OSError: the program does not exist or cannot be run (as the spawn would).
        """
        command = list(argv)
        if not confined:
            found = _check_program(argv[0], cwd, env)
            if "PATH" not in env and "/" not in argv[0]:
                command[0] = found  # the shell's own default PATH is not the spawn's
        watch: TmpfsWatch | None = None
        if confined and self.tmp_bytes is not None:
            from .tmpfs import TmpfsWatch

            watch = TmpfsWatch(self.tmp_bytes)
            command[1:1] = watch.bwrap_options()
        if self.group is not None:
            files = [str(path) for path in self.group.procs_files]
            command = ["/bin/sh", "-c", _JOIN, "atlante-limits", *files, "--", *command]
        before = self._counters()

        def after_exit() -> None:
            try:
                self._record(phase, before, full=watch is not None and watch.full())
            finally:
                if watch is not None:
                    watch.close()

        return SpawnPlan(
            command,
            dict(env),
            pass_fds=watch.pass_fds if watch is not None else (),
            after_spawn=watch.after_spawn if watch is not None else None,
            after_exit=after_exit,
            confined=confined,
        )

    def _counters(self) -> Counters | None:
        if self.group is None:
            return None
        try:
            return self.group.counters()
        except OSError:
            return None

    def _record(self, phase: Phase, before: Counters | None, *, full: bool) -> None:
        """Record each limit whose counter grew since ``before`` (and a full tmpfs)."""
        after = self._counters()
        limits = self.limits
        found: list[tuple[Literal["memory", "pids", "tmp"], int | None]] = []
        if before is not None and after is not None:
            if after.oom_kills > before.oom_kills:
                found.append(("memory", limits.memory_mb))
            if after.pids_max > before.pids_max:
                found.append(("pids", limits.pids))
        if full:
            found.append(("tmp", limits.tmp_mb))
        for name, value in found:
            if value is not None and (phase, name) not in self._reached:
                self._reached[(phase, name)] = LimitReached(phase=phase, limit=name, value=value)


def _check_program(program: str, cwd: Path, env: Mapping[str, str]) -> str:
    """Find ``program`` as the spawn would, or raise what it would: not found, not executable.

    The join step execs the program itself, so a missing one would otherwise be
    an exit status (127) instead of a spawn error.
    """
    if "/" in program:
        path: str | None = os.path.join(cwd, program)
    else:
        path = shutil.which(program, mode=os.F_OK, path=env.get("PATH", os.defpath))
    if path is None or not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return path


@contextlib.asynccontextmanager
async def open_trial_limits(settings: LimitSettings) -> AsyncIterator[TrialLimits]:
    """One trial's limits for the block: its group created first, emptied and removed after.

    Raises:
        SandboxError: the group could not be created (the trial is an ``infra-error``).
    """
    hierarchy = settings.hierarchy
    group: TrialGroup | None = None
    if hierarchy is not None:
        name = f"trial-{secrets.token_hex(6)}"
        try:
            group = await anyio.to_thread.run_sync(
                hierarchy.create, name, settings.limits.group_limits()
            )
        except OSError as exc:
            raise SandboxError(f"cannot create the trial's control group: {exc}") from exc
    try:
        yield TrialLimits(settings.limits, group)
    finally:
        if group is not None:
            with anyio.CancelScope(shield=True):
                problem = await anyio.to_thread.run_sync(group.remove)
                if problem is not None:
                    log.warning("limits.trial-cleanup-failed", problem=problem)


def with_limits(result: TrialResult, reached: Sequence[LimitReached]) -> TrialResult:
    """``result`` with the limits it reached recorded, and made its cause when it did not pass.

    A session that a limit ended (its host failed, no checks ran) is
    ``budget-exceeded``, like a token budget: the trial used more than it was
    given. Otherwise the verdict stands (a check that failed under a limit
    failed), and the limit leads the error.
    """
    if not reached:
        return result
    causes = "; ".join(r.cause for r in reached)
    update: dict[str, object] = {"limits_reached": list(reached)}
    ended_session = result.checks is None and any(r.phase == "session" for r in reached)
    if result.verdict == "infra-error" and ended_session:
        update["verdict"] = "budget-exceeded"
    if result.verdict != "pass":
        update["error"] = f"{causes}: {result.error}" if result.error else causes
    return result.model_copy(update=update)
