"""Run a plan's trials concurrently and grade them.

One anyio task group owns every trial. Trials take their places strictly in plan
order (so ``jobs=1`` reproduces the reference's sequential order). Each trial
assembles its sandbox, takes a host session from the run-wide session budget,
waits for one of ``jobs`` session slots, runs the host inside two cancel scopes
(its timeout and its token budget), grades the sandbox, and is recorded at its
plan position; its sandbox is removed after its slot is free. With ``jobs`` above
1, up to ``jobs`` further trials assemble ahead while sessions run, and finished
sessions are graded without holding a session slot. A problem in one trial
becomes that trial's verdict; it never stops the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired

import anyio
import anyio.abc

from .._util.environment import allowed_env
from .._util.fstree import RemovalFailure
from .._util.logs import get_logger
from .._util.paths import display_path
from ..hosts.base import Host, HostError, SessionEnd, SessionUsage, TrialContext, secret_values
from ..isolation.limits import LimitSettings, limited, run_limit_groups
from ..project import BEHAVIOUR_CHECK_TAGS, NativeOutputs, Plan, PlannedTrial
from ..report import (
    Activity,
    FinalStateRef,
    ProgressEvent,
    RunFiles,
    TamperEvidence,
    TrialFiles,
    TrialResult,
    TrialStarted,
    utc_timestamp,
)
from ..report.blobstore import BlobStore
from ..transcript import (
    LOG_CHARS,
    ErrorEntry,
    Redactor,
    TranscriptEntry,
    TranscriptWriter,
    cap_text,
)
from ..trial import (
    Changes,
    Sandbox,
    SandboxError,
    SpawnWrapper,
    TrialDirs,
    confined_spawns,
    make_skeleton,
    trial_dirs,
    trial_sandbox,
)
from ..trial.finalstate import StateSettings, TrialState
from .arm_setup import ArmSetup
from .failures import crash_text
from .metering import GatewayRun, MeteredFields, TrialMeter, settle
from .redaction import redact_trial, untrusted_transcript

if TYPE_CHECKING:  # the isolation layer loads with the first trial it confines or limits
    from ..isolation.trial import IsolationSettings, TrialIsolation

__all__ = ["Engine", "EngineOptions", "TrialGuard", "TrialHook"]

log = get_logger("atlante_eval.run.engine")

EventSink = Callable[[ProgressEvent], Awaitable[None]]
#: Called with a finished trial and its plan position (e.g. to journal it).
TrialHook = Callable[[PlannedTrial, TrialResult], Awaitable[None]]
#: Returns why a trial must not run (e.g. its inputs in the project changed), or None.
TrialGuard = Callable[[PlannedTrial], Awaitable[str | None]]


class _Refused(Exception):
    """Raised inside a trial when its guard refuses it; becomes the trial's infra-error."""


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How the engine runs a plan."""

    jobs: int
    keep: bool = False
    model: str | None = None
    pass_env: tuple[str, ...] = ()
    retry_infra: int = 0
    project_root: Path | None = None
    run_files: RunFiles | None = None
    """The run directory each trial's transcript and long outputs go to (``None``: none)."""
    isolation: IsolationSettings | None = None
    """``--isolation os``: confine every trial; ``None`` is ``none`` (tool policy only)."""
    limits: LimitSettings | None = None
    """Per-trial resource limits (``eval.limits``, ``--limit``), proven by the preflight."""
    gateway: GatewayRun | None = None
    """The run's model gateway (``None``: off); each trial gets a route (docs/gateway.md)."""
    final_state: StateSettings | None = None
    """Store each graded trial's final state for ``regrade`` (``None``: ``--no-final-state``)."""


class _SessionLedger:
    """The run-wide session budget, decided in plan order whatever the concurrency.

    A trial takes a session only after its sandbox is assembled; a trial whose
    assembly fails takes none. Trial *k* is skipped exactly when the trials before
    it in plan order took ``max_sessions`` sessions, as in a sequential run. While
    earlier trials are still assembling, a trial waits until its fate is certain.
    """

    def __init__(self, size: int, max_sessions: int, preset: dict[int, bool]) -> None:
        self.max = max_sessions
        # None: undecided; True: took a session; False: took none.
        self.took: list[bool | None] = [preset.get(i) for i in range(size)]
        self.changed = anyio.Condition()

    async def admit(self, position: int) -> bool:
        """Wait until ``position`` is certain to get a session (True) or not (False)."""
        async with self.changed:
            while True:
                before = self.took[:position]
                taken = sum(1 for t in before if t is True)
                if taken >= self.max:
                    self.took[position] = False
                    self.changed.notify_all()
                    return False
                undecided = sum(1 for t in before if t is None)
                if taken + undecided < self.max:
                    return True
                await self.changed.wait()

    async def settle(self, position: int, *, took_session: bool) -> None:
        """Record whether ``position`` took a session."""
        async with self.changed:
            self.took[position] = took_session
            self.changed.notify_all()


class _Slots:
    """How many trials may hold a host session, and how many may work around them.

    With ``jobs`` above 1, up to ``jobs`` further trials assemble their sandboxes
    while the sessions run, and up to ``jobs`` finished sessions are graded
    without holding a session slot: assembly and grading (CPU-bound git and file
    work) overlap model latency instead of adding to it. With one job there is a
    single slot, held from assembly to the verdict, so events follow plan order
    exactly (the reference's sequence).
    """

    def __init__(self, jobs: int) -> None:
        self.overlap = jobs > 1
        self.sessions = anyio.CapacityLimiter(max(1, jobs))
        self.ahead = anyio.CapacityLimiter(jobs) if self.overlap else self.sessions
        self.grading = anyio.CapacityLimiter(jobs) if self.overlap else self.sessions


class _Ticket:
    """One trial's hold on :class:`_Slots` (one slot at a time); see :meth:`release`."""

    def __init__(self, slots: _Slots, owned: TrialDirs) -> None:
        self.slots = slots
        self._held: anyio.CapacityLimiter | None = None
        self.owned = owned
        """The trial's directories, removed when the trial is over."""

    async def _move_to(self, limiter: anyio.CapacityLimiter) -> None:
        if self._held is limiter:
            return
        await limiter.acquire()
        previous, self._held = self._held, limiter
        if previous is not None:
            previous.release()

    async def take_turn(self) -> None:
        """Take a place among the trials that are getting ready (plan order)."""
        await self._move_to(self.slots.ahead)

    async def start_session(self) -> None:
        """Take a session slot, giving back the place held until now."""
        await self._move_to(self.slots.sessions)

    async def end_session(self) -> None:
        """Move from the session slot to a grading slot."""
        await self._move_to(self.slots.grading)

    def release(self) -> None:
        """Give back whatever this trial holds."""
        if self._held is not None:
            self._held.release()
            self._held = None


@dataclass
class Engine:
    """Runs one plan against one host."""

    plan: Plan
    host: Host
    native: NativeOutputs
    run_root: Path
    options: EngineOptions
    emit: EventSink
    on_trial: TrialHook
    """Records a finished trial (and announces it)."""
    preset_sessions: dict[int, bool] = field(default_factory=dict)
    """Plan positions already decided (resume): whether each took a session."""
    cleanup_failures: list[RemovalFailure] = field(default_factory=list)
    """Trial directories that could not be removed (the run goes on)."""
    guard: TrialGuard | None = None
    """Asked before each trial's assembly; a cause it returns makes the trial an infra-error."""
    arms: Mapping[str, ArmSetup] = field(default_factory=dict)
    """Each arm's host, native outputs and model (a trial of no arm runs the engine's own)."""
    on_session_end: Callable[[bool], None] | None = None
    """Called each time a trial's session and grading are over (e.g. to prewarm the run's
    end), with whether every trial of :meth:`run` has taken its turn (none waits to start)."""
    _last_turn: anyio.Event | None = field(default=None, init=False, repr=False)
    """Set when the last trial of :meth:`run` has taken its turn."""
    _skeleton: Path | None = field(default=None, init=False, repr=False)
    """An empty repository copied into each sandbox instead of ``git init``."""
    _group: anyio.abc.TaskGroup | None = field(default=None, init=False, repr=False)
    """The task group of the running trials."""
    _store: BlobStore | None = field(default=None, init=False, repr=False)
    """The run directory's content store, while :meth:`run` runs (final states)."""

    async def run(self, positions: list[int] | None = None, *, sessions: int | None = None) -> int:
        """Run the trials at ``positions`` (default: all); each result goes to ``on_trial``.

        By default the whole plan shares ``maxSessions`` in plan order, and positions
        not run here (other shards, reused trials) count as having taken a session.
        With ``sessions`` (an adaptive run's wave), only ``positions`` share that many
        sessions, in plan order. Returns the sessions the trials run here took.
        """
        wanted = positions if positions is not None else [t.position for t in self.plan.trials]
        preset: dict[int, bool]
        if sessions is None:
            preset = {
                **self.preset_sessions,
                **{
                    p: True
                    for p in range(len(self.plan.trials))
                    if p not in wanted and p not in self.preset_sessions
                },
            }
        else:
            chosen = set(wanted)
            preset = {p: False for p in range(len(self.plan.trials)) if p not in chosen}
        ledger = _SessionLedger(
            len(self.plan.trials),
            self.plan.config.max_sessions if sessions is None else max(0, sessions),
            preset,
        )
        self._skeleton = await make_skeleton(self.run_root)
        slots = _Slots(max(1, self.options.jobs))
        turns = {position: anyio.Event() for position in wanted}
        previous: dict[int, anyio.Event | None] = {}
        last: anyio.Event | None = None
        for position in wanted:
            previous[position] = last
            last = turns[position]
        self._last_turn = last
        with self._open_store():
            async with run_limit_groups(self.options.limits), anyio.create_task_group() as group:
                self._group = group
                for position in wanted:
                    group.start_soon(
                        self._trial_task,
                        self.plan.trials[position],
                        ledger,
                        slots,
                        previous[position],
                        turns[position],
                    )
        return sum(1 for position in wanted if ledger.took[position] is True)

    @contextlib.contextmanager
    def _open_store(self) -> Iterator[None]:
        """Hold the run's content store open while trials run (when final states are on)."""
        run_files = self.options.run_files
        if self.options.final_state is None or run_files is None:
            yield
            return
        self._store = BlobStore.open(run_files)
        if self._store is None:
            log.warning("run.final-state-unwritable")
        try:
            yield
        finally:
            if self._store is not None:
                self._store.close()
                self._store = None

    async def _trial_task(
        self,
        planned: PlannedTrial,
        ledger: _SessionLedger,
        slots: _Slots,
        wait_for: anyio.Event | None,
        my_turn: anyio.Event,
    ) -> None:
        # The trial's directories are removed when this scope ends, after the slot
        # is free: removing a tree is no reason to make the next trial wait.
        async with trial_dirs(keep=self.options.keep, failures=self.cleanup_failures) as owned:
            ticket = _Ticket(slots, owned)
            try:
                if wait_for is not None:
                    await wait_for.wait()
                admitted = await ledger.admit(planned.position)
                # Places are taken in plan order, and every trial (a skipped one too) is
                # announced before it gives its slot back: with one job, events follow
                # plan order exactly.
                await ticket.take_turn()
                my_turn.set()
                if admitted:
                    result = await self._attempts(planned, ledger, ticket)
                else:
                    result = TrialResult(i=planned.index, verdict="skipped-budget", duration_ms=0)
                await self._finish(planned, result)
            except Exception:
                # A failing hook ends the run: stop every other trial now, before this
                # one's cleanup lets the next take the freed slot.
                if self._group is not None:
                    self._group.cancel_scope.cancel()
                raise
            finally:
                ticket.release()
                my_turn.set()

    def _host(self, planned: PlannedTrial) -> Host:
        """The host of the trial's arm (the engine's own without arms)."""
        setup = self.arms.get(planned.variant or "")
        return setup.host if setup is not None else self.host

    def _native(self, planned: PlannedTrial) -> NativeOutputs:
        """The native outputs the trial's arm installs."""
        setup = self.arms.get(planned.variant or "")
        return setup.native if setup is not None else self.native

    def _model(self, planned: PlannedTrial) -> str | None:
        """The model of the trial's arm (``eval.model`` without arms)."""
        setup = self.arms.get(planned.variant or "")
        return setup.model if setup is not None else self.options.model

    def _dropped_agent(self, planned: PlannedTrial) -> str | None:
        """The ``task.agent`` a ``harness: "none"`` arm runs its trial without."""
        setup = self.arms.get(planned.variant or "")
        agent = planned.scenario.document.task.agent
        return agent if setup is not None and setup.drops_agent else None

    async def _finish(self, planned: PlannedTrial, result: TrialResult) -> None:
        if planned.variant is not None:
            result = _with_arm(result, planned.variant, self._dropped_agent(planned))
        log.info(
            "trial.end",
            scenario=planned.scenario.name,
            trial=planned.index,
            verdict=result.verdict,
            duration_ms=result.duration_ms,
        )
        await self.on_trial(planned, result)

    async def _attempts(
        self, planned: PlannedTrial, ledger: _SessionLedger, ticket: _Ticket
    ) -> TrialResult:
        earlier: list[TrialResult] = []
        while True:
            start = TrialStarted(
                planned.scenario.name,
                planned.index,
                attempt=len(earlier) + 1,
                attempts=self.options.retry_infra + 1,
                previous=earlier[-1].error if earlier else None,
                variant=planned.variant,
            )
            result = await self._trial(planned, ledger, ticket, settle=not earlier, start=start)
            if result.verdict != "infra-error" or len(earlier) >= self.options.retry_infra:
                break
            earlier.append(result)
            log.info("trial.retry", scenario=planned.scenario.name, trial=planned.index)
        if not earlier:
            return result
        from ..report import TrialAttempt

        attempts = [
            TrialAttempt(verdict=r.verdict, duration_ms=r.duration_ms, error=r.error)
            for r in earlier
        ]
        return result.model_copy(update={"attempts": attempts})

    async def _trial(
        self,
        planned: PlannedTrial,
        ledger: _SessionLedger,
        ticket: _Ticket,
        *,
        settle: bool,
        start: TrialStarted,
    ) -> TrialResult:
        scenario = planned.scenario
        await self.emit(start)
        log.info("trial.start", scenario=scenario.name, trial=planned.index)
        started = time.monotonic()
        started_at = utc_timestamp()
        redact = self._redactor()
        took_session = False
        kept: Path | None = None
        isolation: TrialIsolation | None = None
        try:
            refusal = await self.guard(planned) if self.guard is not None else None
            if refusal is not None:
                raise _Refused(refusal)
            async with (
                self._isolation() as isolation,
                self._meter(planned, redact) as meter,
                trial_sandbox(
                    self.run_root,
                    scenario,
                    planned.index,
                    native=self._native(planned),
                    prepare_host=lambda root, state: self._prepare(planned, root, state, meter),
                    owner=ticket.owned,
                    skeleton=self._skeleton,
                    confine_setup=_phase(isolation, "setup"),
                    setup_env=self._setup_env(),
                    record_prepared=self._store is not None,
                ) as sandbox,
            ):
                kept = sandbox.trial_dir
                state = await self._state(planned, sandbox)
                if settle:
                    took_session = True
                    await ledger.settle(planned.position, took_session=True)
                await ticket.start_session()
                result = await self._session(
                    planned, sandbox, ticket, isolation, redact, meter, state
                )
                if self.on_session_end is not None:
                    last_turn = self._last_turn
                    self.on_session_end(last_turn is None or last_turn.is_set())
        except _Refused as exc:
            result = TrialResult(
                i=planned.index,
                verdict="infra-error",
                duration_ms=int((time.monotonic() - started) * 1000),
                error=str(exc),
            )
        except SandboxError as exc:
            kept = exc.trial_dir
            log_ref = (
                self._keep_output(planned, "setup.log", exc.output, redact) if exc.output else None
            )
            result = TrialResult(
                i=planned.index,
                verdict="infra-error",
                duration_ms=int((time.monotonic() - started) * 1000),
                error=str(exc) + (f" (full output: {log_ref})" if log_ref else ""),
                host_evidence={"setupLog": log_ref} if log_ref else None,
            )
        except Exception as exc:
            log.exception("trial.crash", scenario=scenario.name, trial=planned.index)
            result = TrialResult(
                i=planned.index,
                verdict="infra-error",
                duration_ms=int((time.monotonic() - started) * 1000),
                error=crash_text(exc),
            )
        finally:
            if settle and not took_session:
                with anyio.CancelScope(shield=True):
                    await ledger.settle(planned.position, took_session=False)
        extra: dict[str, object] = {"started_at": started_at}
        if isolation is not None:
            result = isolation.settle(result)
        if self.options.keep and kept is not None:
            extra["sandbox"] = display_path(str(kept))
        # The one redaction point of everything the trial reports (run/redaction.py).
        return redact_trial(result.model_copy(update=extra), redact)

    @contextlib.asynccontextmanager
    async def _isolation(self) -> AsyncIterator[TrialIsolation | None]:
        """The trial's OS isolation and limits (for the block), or ``None``."""
        options = self.options
        if options.isolation is None and not limited(options.limits):
            yield None
            return
        from ..isolation.trial import open_trial_isolation

        async with open_trial_isolation(
            options.isolation, options.limits, self.run_root
        ) as isolation:
            yield isolation

    @contextlib.asynccontextmanager
    async def _meter(
        self, planned: PlannedTrial, redact: Redactor
    ) -> AsyncIterator[TrialMeter | None]:
        """The trial's route through the run's gateway, or ``None`` when it is off."""
        if self.options.gateway is None:
            yield None
            return
        with TrialMeter.open(
            self.options.gateway,
            max_tokens=self.plan.config.max_tokens,
            files=self._trial_files(planned),
            redact=redact,
        ) as meter:
            yield meter

    def _setup_env(self) -> dict[str, str] | None:
        """Under ``os``, setup gets the checks' allowlisted environment plus ``--pass-env``."""
        if self.options.isolation is None:
            return None  # the reference: the full environment
        return allowed_env(extra=self.options.pass_env)

    def _context(
        self, planned: PlannedTrial, root: Path, state: Path, meter: TrialMeter | None = None
    ) -> TrialContext:
        scenario = planned.scenario
        if self._dropped_agent(planned) is not None:  # the bare host's default agent
            task = scenario.document.task.model_copy(update={"agent": None})
            scenario = replace(
                scenario, document=scenario.document.model_copy(update={"task": task})
            )
        return TrialContext(
            scenario=scenario,
            trial=planned.index,
            sandbox=root,
            state_dir=state,
            native=self._native(planned),
            model=self._model(planned),
            pass_env=self.options.pass_env,
            project_root=self.options.project_root,
            gateway=meter.route if meter is not None else None,
        )

    async def _state(self, planned: PlannedTrial, sandbox: Sandbox) -> TrialState | None:
        """Start the trial's final state: what host preparation and setup changed."""
        settings = self.options.final_state
        if self._store is None or settings is None:
            return None
        if planned.variant is not None:  # the task basis names the arm's own harness build
            settings = dataclasses.replace(settings, native_digest=self._native(planned).digest)
        state = TrialState(
            self._store,
            settings,
            planned.scenario,
            planned.index,
            ignored=self._host(planned).ignored_changes,
            secrets=secret_values(os.environ, pass_env=self.options.pass_env),
        )
        await anyio.to_thread.run_sync(state.record_prepared, sandbox)
        return state

    def _redactor(self) -> Redactor:
        return Redactor(secret_values(os.environ, pass_env=self.options.pass_env))

    def _keep_output(
        self, planned: PlannedTrial, name: str, text: str, redact: Redactor
    ) -> str | None:
        """Write a long output beside the trial's transcript; return its run-relative path."""
        files = self._trial_files(planned)
        if files is None:
            return None
        with files:
            try:
                with files.create(name) as handle:
                    handle.write(cap_text(redact(text), LOG_CHARS).encode("utf-8"))
            except OSError as exc:
                log.warning("trial.log-unwritable", file=name, error=str(exc))
                return None
            return files.path_of(name)

    def _trial_files(self, planned: PlannedTrial) -> TrialFiles | None:
        """The trial's directory in the run directory (``None``: not recorded, or unsafe)."""
        run_files = self.options.run_files
        if run_files is None:
            return None
        files = run_files.trial(planned.key, planned.index)
        if files is None:
            log.warning("trial.files-unwritable", scenario=planned.scenario.name)
        return files

    def _read_transcript(
        self, planned: PlannedTrial
    ) -> tuple[list[TranscriptEntry] | None, str | None]:
        """The trial's transcript entries for behaviour checks, or why there are none.

        Read only when the scenario has a behaviour check: the others never look at it.
        """
        if not any(c.type in BEHAVIOUR_CHECK_TAGS for c in planned.scenario.document.checks):
            return None, None
        from ..checks import NO_TRANSCRIPT, read_transcript  # grading: after the session

        files = self._trial_files(planned)
        if files is None:
            return None, f"{NO_TRANSCRIPT}: none was recorded"
        with files:
            return read_transcript(files)

    def _transcript(
        self, planned: PlannedTrial, sandbox: Sandbox, redact: Redactor, meter: TrialMeter | None
    ) -> TranscriptWriter | None:
        files = self._trial_files(planned)
        if files is None:
            return None
        writer = TranscriptWriter(
            files,
            host=self._host(planned).name,
            scenario=planned.scenario.name,
            trial=planned.index,
            sandbox=sandbox.root,
            redactor=redact,
            observer=meter.ledger.observe if meter is not None else None,
        )
        try:
            return writer.open()
        except OSError as exc:
            log.warning("trial.transcript-unwritable", error=str(exc))
            writer.close()
            return None

    def _prepare(
        self, planned: PlannedTrial, root: Path, state: Path, meter: TrialMeter | None
    ) -> None:
        try:
            self._host(planned).prepare(self._context(planned, root, state, meter))
        except HostError as exc:
            raise SandboxError(str(exc)) from exc

    async def _session(
        self,
        planned: PlannedTrial,
        sandbox: Sandbox,
        ticket: _Ticket,
        isolation: TrialIsolation | None,
        redact: Redactor,
        meter: TrialMeter | None,
        state: TrialState | None,
    ) -> TrialResult:
        config = self.plan.config
        transcript = self._transcript(planned, sandbox, redact, meter)
        if meter is not None:
            meter.transcribed = transcript is not None
        context = replace(
            self._context(planned, sandbox.root, sandbox.state_dir, meter),
            transcript=transcript,
            redact=redact,
        )
        budget_scope = anyio.CancelScope()
        stop = meter.budget(budget_scope.cancel) if meter is not None else budget_scope.cancel
        usage = SessionUsage(config.max_tokens, stop)
        started = time.monotonic()
        end = SessionEnd()
        try:
            with budget_scope, anyio.move_on_after(planned.timeout_ms / 1000) as timer:
                try:
                    wrapper = (
                        isolation.wrapper("session", sandbox.root, sandbox.state_dir)
                        if isolation is not None
                        else None
                    )
                    with confined_spawns(wrapper):
                        end = await self._host(planned).run_session(context, usage)
                except Exception as exc:  # noqa: BLE001 - a failing host is this trial's infra-error
                    end = SessionEnd(
                        error=f"host {self._host(planned).name} failed: {type(exc).__name__}: {exc}"
                    )
        finally:
            # Also when the run is cancelled: everything up to now stays on disk.
            if transcript is not None:
                if end.error is not None and transcript.first_error is None:
                    transcript.write(ErrorEntry(t=transcript.elapsed_ms(), message=end.error))
                transcript.close()
        duration_ms = int((time.monotonic() - started) * 1000)
        model = self._model(planned)
        if usage.model is None and model:
            usage.observe_model(model)
        completed = not (timer.cancelled_caught or budget_scope.cancel_called or end.error)
        settled = settle(meter, usage, self.options.gateway, completed=completed)
        for evidence in settled.tampered:  # the gateway's, after the stream's own
            usage.tamper(evidence.kind, evidence.detail)
        base = _SessionFields(
            i=planned.index,
            duration_ms=duration_ms,
            tokens=settled.tokens,
            cost=settled.cost,
            model=settled.model,
            model_version=settled.model_version,
            host_evidence={**usage.evidence, **end.evidence} or None,
            tampered=list(usage.tampered) or None,
            tampered_omitted=usage.tampered_omitted or None,
        )
        settled.add_to(base)
        if transcript is not None:
            base["transcript"] = transcript.relative_path
            base["activity"] = transcript.activity()
        if settled.exceeded:
            return TrialResult(
                **base,
                verdict="budget-exceeded",
                error=f"trial exceeded {config.max_tokens} tokens",
            )
        unmonitored: Literal[True] | None = True if settled.tokens is None else None
        if timer.cancelled_caught:
            return TrialResult(
                **base,
                verdict="timeout",
                budget_unmonitored=unmonitored,
                error=f"trial exceeded {planned.timeout_ms}ms",
                timeout_ms=planned.timeout_ms,
            )
        if end.error is not None:
            return TrialResult(**base, verdict="infra-error", error=end.error)
        await ticket.end_session()
        return await self._grade(planned, sandbox, base, unmonitored, isolation, redact, state)

    async def _grade(
        self,
        planned: PlannedTrial,
        sandbox: Sandbox,
        base: _SessionFields,
        unmonitored: Literal[True] | None,
        isolation: TrialIsolation | None,
        redact: Redactor,
        state: TrialState | None,
    ) -> TrialResult:
        from .grading import Grading, grade_sandbox  # after the session, off the launch path

        transcript, transcript_error = self._read_transcript(planned)
        if base["tampered"] and transcript is not None:
            transcript, transcript_error = None, untrusted_transcript(base["tampered"])

        async def record_final(changes: Changes | None) -> None:
            if state is not None:
                await anyio.to_thread.run_sync(state.record_final, sandbox, changes)

        graded = await grade_sandbox(
            planned.scenario.document.checks,
            sandbox,
            Grading(
                ignored=self._host(planned).ignored_changes,
                transcript=transcript,
                transcript_error=transcript_error,
                redact=redact,
                keep_output=lambda name, text: self._keep_output(planned, name, text, redact),
                wrap=isolation.wrapper("check", sandbox.root, sandbox.state_dir)
                if isolation is not None
                else None,
                before_checks=record_final,
            ),
        )
        return TrialResult(
            **base,
            budget_unmonitored=unmonitored,
            **graded.fields(),
            final_state=self._publish_state(planned, state),
        )

    def _publish_state(
        self, planned: PlannedTrial, state: TrialState | None
    ) -> FinalStateRef | None:
        """Write the trial's final-state manifest; its reference for the report."""
        if state is None:
            return None
        files = self._trial_files(planned)
        if files is None:
            return None
        with files:
            try:
                return state.publish(files)
            except OSError as exc:
                log.warning("trial.final-state-unwritable", error=str(exc))
                return None


def _with_arm(result: TrialResult, variant: str, dropped_agent: str | None) -> TrialResult:
    """The trial's result naming its arm (and the agent a ``none`` arm ran without)."""
    update: dict[str, object] = {"variant": variant}
    if dropped_agent is not None:
        update["host_evidence"] = {**(result.host_evidence or {}), "agentDropped": dropped_agent}
    return result.model_copy(update=update)


def _phase(
    isolation: TrialIsolation | None, phase: Literal["setup"]
) -> Callable[[Path, Path], SpawnWrapper] | None:
    """A factory of the ``phase`` wrapper for :func:`trial_sandbox`, or ``None``."""
    if isolation is None:
        return None
    return lambda root, state: isolation.wrapper(phase, root, state)


class _SessionFields(MeteredFields):
    """The report fields of a trial that its host session decides, whatever the verdict."""

    i: int
    duration_ms: int
    tokens: int | None
    cost: float | None
    model: str | None
    model_version: str | None
    host_evidence: dict[str, Any] | None
    tampered: list[TamperEvidence] | None
    tampered_omitted: int | None
    transcript: NotRequired[str]
    activity: NotRequired[Activity]


async def call_sink(sink: Callable[[ProgressEvent], object] | None, event: ProgressEvent) -> None:
    """Call a sync or async progress callback."""
    if sink is None:
        return
    outcome = sink(event)
    if inspect.isawaitable(outcome):
        await outcome
