"""Prepare a run: every step before its directory is reserved.

:func:`prepare_run` loads and validates the suite, selects the scenarios
(``--last-failed``), fits the jobs to the descriptor limit, resolves the budget
(raised for ``--until-decided``), readies the host (a pinned version from the
managed host cache, installed on first use: :mod:`.pinning`) and the isolation
(the preflight runs before the host is probed), plans the trials, snapshots the
project's inputs into fingerprints, and picks the positions this run owns
(``--shard``) and those it reuses (``--resume``). Every warning found on the
way is sent to the progress callback as it is found. Nothing is written: a
problem here raises :class:`~atlante_eval.diagnostics.DiagnosticError` before
any run directory exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ..choices import SELFTEST_HOST, GatewayMode
from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from ..history import HistoryLocation
from ..hosts import Host, HostError
from ..isolation.limits import LimitSettings
from ..project import (
    Plan,
    ProjectWatch,
    Scenario,
    Suite,
    budget_skips,
    definition_digest,
    load_suite,
    make_plan,
    model_diagnostics,
    plan_digest,
    resolve_budget,
    scenario_fingerprint,
    watch_run_inputs,
)
from ..project.config import Project
from ..project.variants import arms_seed
from ..report import (
    DiagnosticNotice,
    HostSource,
    MetaConfig,
    ProgressEvent,
    RunReport,
    TrialResult,
    report_base,
)
from ..trial.finalstate import StateSettings
from .arm_setup import ArmSetup
from .arms import check_arm_selection, ready_arms
from .balance import ShardSplit, shard_split
from .engine import call_sink
from .isolate import resolve_isolation, resolve_limits_settings
from .journal import read_journal
from .limits import DESCRIPTORS_PER_JOB, jobs_for_descriptors, raise_nofile_limit
from .options import RunOptions
from .pinning import RunHost, check_pinned_version, check_resumed_host, host_pin, run_host
from .record import recording_for

if TYPE_CHECKING:
    from ..isolation.trial import IsolationSettings
    from .adaptive import AdaptiveSettings
    from .waves import WaveDriver

__all__ = ["NothingToRerun", "PreparedRun", "ProgressCallback", "announce", "prepare_run"]

#: Called (sync or async) with each progress event.
ProgressCallback = Callable[[ProgressEvent], object]


class NothingToRerun(DiagnosticError):
    """Raised by :func:`~atlante_eval.run_eval` with ``last_failed`` when every scenario passed.

    The run it looked at had nothing that did not pass: nothing ran, no run
    directory was made, nothing was published or recorded. ``exit_code`` is 0;
    ``diagnostics`` holds one ``last-failed`` warning naming that run, and
    ``report_path`` is its report.
    """

    def __init__(self, diagnostic: Diagnostic, report_path: Path) -> None:
        super().__init__([diagnostic], exit_code=0)
        self.args = (diagnostic.message,)
        self.report_path = report_path


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """A run ready to start: everything decided before its directory is reserved."""

    suite: Suite
    options: RunOptions
    """The options, ``jobs`` fitted to the descriptor limit."""
    host: Host
    """The probed host."""
    host_source: HostSource | None
    """Where the host came from: its managed copy, or the executable on PATH."""
    isolation: IsolationSettings | None
    """``--isolation os`` once the preflight passed; ``None`` for ``none``."""
    limits: LimitSettings
    """The per-trial resource limits, proven enforceable here."""
    plan: Plan
    watch: ProjectWatch
    """The project's inputs, snapshotted: a trial whose inputs change is refused."""
    fingerprints: Mapping[str, str]
    """Each scenario's fingerprint (what ``--resume`` matches)."""
    definitions: Mapping[str, str]
    """Each scenario's definition digest (what ``compare`` matches)."""
    digest: str
    """The plan's digest."""
    split: ShardSplit | None
    """The ``--shard`` split (``None``: the whole plan)."""
    positions: list[int]
    """The plan positions this run owns (``--shard``)."""
    reused: Mapping[int, TrialResult]
    """The positions ``--resume`` reuses, with their earlier results."""
    driver: WaveDriver | None
    """The adaptive driver of an ``--until-decided`` run."""
    notices: list[Diagnostic]
    """The warnings found so far (announced already); the run adds its late ones."""
    arms: Mapping[str, ArmSetup]
    """Each arm's host, native outputs and model, by name (empty: no arms)."""

    def final_state(self) -> StateSettings | None:
        """How the run stores its trials' final states (``None``: ``--no-final-state``)."""
        if not self.options.final_state:
            return None
        assert self.suite.native is not None
        digests = {s.name: self.watch.tree_digest(s.fixture_path) for s in self.plan.scenarios}
        return StateSettings(
            cap_bytes=self.options.final_state_cap,
            fixture_digests={name: d for name, d in digests.items() if d is not None},
            native_digest=self.suite.native.digest,
        )

    @property
    def gateway(self) -> GatewayMode:
        """Whether the run's trials go through the model gateway (``--gateway``, else
        ``eval.gateway``)."""
        return self.options.gateway or self.suite.project.eval.gateway

    @property
    def pending(self) -> list[int]:
        """The owned positions that still need a trial."""
        return [p for p in self.positions if p not in self.reused]


async def prepare_run(
    path: Path | str | Project | None,
    options: RunOptions,
    *,
    host: Host | None,
    on_event: ProgressCallback | None,
    leases: ExitStack,
) -> PreparedRun:
    """Every step before the run directory, announcing each warning as it is found.

    A pinned host's lease on its managed copy is held until ``leases`` closes.

    Raises:
        DiagnosticError: validation (exit 2), or a host or isolation that cannot
            work here (exit 3).
    """
    suite = load_suite(path, scenario_filter=list(options.scenarios))
    selected, notices = _selection(suite, options)
    with_arms = check_arm_selection(suite, options)
    options = _fit_jobs(options, notices)
    await announce(on_event, notices)
    model = suite.project.eval.model
    budget, settings = await _budget(
        suite, options, host.name if host else None, with_arms=with_arms
    )
    chosen, isolation, limits = await _ready_host(host, suite, options, on_event, leases)
    ready_host, source = chosen.host, chosen.probed_source()
    if options.resume is not None:
        check_resumed_host(options.resume, ready_host, source)
    notices.extend(await announce(on_event, _model_notes(ready_host, model)))
    setups, arm_notes = await ready_arms(
        suite, options, chosen, given=host, scenarios=selected, on_event=on_event, leases=leases
    )
    notices.extend(await announce(on_event, arm_notes))
    arms = tuple(setup.arm for setup in setups.values())
    seed = arms_seed([s.name for s in selected], arms, budget.trials) if arms else None
    plan = make_plan(selected, budget, arms=arms, seed=seed)
    watch = watch_run_inputs(suite.project.root, plan.scenarios, suite.native)
    fingerprints, definitions = await anyio.to_thread.run_sync(
        _fingerprints, plan, suite, _Identity(ready_host, model, setups), watch
    )
    history = _balance_history(suite, options)
    split, positions, reused = await _owned(plan, options, fingerprints, on_event, notices, history)
    driver = _driver(settings, plan, definitions)
    notices.extend(await announce(on_event, driver.notices() if driver is not None else []))
    await announce(on_event, _budget_notes(plan, positions, reused, adaptive=driver is not None))
    return PreparedRun(
        suite=suite,
        options=options,
        host=ready_host,
        host_source=source,
        isolation=isolation,
        limits=limits,
        plan=plan,
        watch=watch,
        fingerprints=fingerprints,
        definitions=definitions,
        digest=plan_digest(plan, fingerprints),
        split=split,
        positions=positions,
        reused=reused,
        driver=driver,
        notices=notices,
        arms=setups,
    )


def _selection(suite: Suite, options: RunOptions) -> tuple[tuple[Scenario, ...], list[Diagnostic]]:
    """The scenarios to run (``--last-failed`` applied) and the warnings found so far."""
    notices = list(suite.warnings)
    if not options.last_failed:
        return suite.scenarios, notices
    selected, note = _last_failed(suite, options)
    if note is not None:
        notices.append(note)
    return selected, notices


def _last_failed(
    suite: Suite, options: RunOptions
) -> tuple[tuple[Scenario, ...], Diagnostic | None]:
    """Scenarios that did not fully pass in the newest real run under the report base.

    Selftest reports (``meta.host`` ``"selftest"``) are skipped: their null agent
    always fails, so taking one would rerun the whole suite.
    """
    from ..report.loading import load_report  # --last-failed only

    base = report_base(suite.project.root, options.out)
    loaded: list[tuple[str, str, Path, RunReport]] = []
    for candidate in sorted(base.glob("*/report.json")) if base.is_dir() else []:
        try:
            report = load_report(candidate)  # bounded: a FIFO or /dev/zero is skipped
        except DiagnosticError:
            continue
        # Run ids have one-second resolution: order by the recorded start time first.
        loaded.append((report.meta.started_at or "", candidate.parent.name, candidate, report))
    skipped = 0
    for _started, _name, candidate, previous in sorted(loaded, reverse=True):
        if previous.meta.host == SELFTEST_HOST:
            skipped += 1
            continue
        failed = {
            name
            for name, result in previous.scenarios.items()
            if any(t.verdict != "pass" for t in result.trials)
        }
        chosen = tuple(s for s in suite.scenarios if s.name in failed)
        if not chosen:
            raise _nothing_to_rerun(previous, candidate, skipped)
        names = ", ".join(s.name for s in chosen)
        note = warning(
            "last-failed",
            f"--last-failed: took run {previous.run_id} ({candidate}); "
            f"{len(chosen)} scenario(s) did not fully pass there: {names}"
            + (f" ({_skipped(skipped)})" if skipped else ""),
            source=str(candidate),
        )
        return chosen, note
    note = warning(
        "last-failed",
        "--last-failed: no earlier run found"
        + (f" ({_skipped(skipped)})" if skipped else "")
        + "; running every selected scenario",
        source=str(base),
    )
    return suite.scenarios, note


def _nothing_to_rerun(previous: RunReport, candidate: Path, skipped: int) -> NothingToRerun:
    """Every selected scenario passed in ``previous``: the run stops before it starts."""
    note = warning(
        "last-failed",
        f"--last-failed: nothing to rerun: every selected scenario passed in run "
        f"{previous.run_id} ({candidate}); nothing was run or published"
        + (f" ({_skipped(skipped)})" if skipped else ""),
        source=str(candidate),
        next="run without --last-failed to run every scenario again",
    )
    return NothingToRerun(note, candidate)


def _skipped(count: int) -> str:
    return f"skipped {count} newer selftest report{'s' if count != 1 else ''}"


def _fit_jobs(options: RunOptions, notices: list[Diagnostic]) -> RunOptions:
    """Raise the descriptor limit; run fewer jobs when it is still too low, noting why."""
    limit = raise_nofile_limit()
    jobs = jobs_for_descriptors(options.jobs, limit)
    if jobs >= options.jobs:
        return options
    note = warning(
        "jobs-limited",
        f"--jobs {options.jobs} needs about {options.jobs * DESCRIPTORS_PER_JOB} open files, "
        f"but only {limit} are allowed (ulimit -n): running {jobs} jobs at once",
        next="raise the hard limit (ulimit -Hn, or LimitNOFILE= in a service) or lower --jobs",
    )
    notices.append(note)
    return options.model_copy(update={"jobs": jobs})


async def _budget(
    suite: Suite, options: RunOptions, host: str | None = None, *, with_arms: bool = False
) -> tuple[MetaConfig, AdaptiveSettings | None]:
    """The run's budget, raised to ``--until-decided``'s most trials when that is on."""
    budget = resolve_budget(suite.project.eval.budget, trials=options.trials)
    if not options.until_decided:
        return budget, None
    # Only an adaptive run needs the driver (and comparison, the sequential design with it).
    from .adaptive import arms_settings, settings_from_options

    settings = (
        arms_settings(options, budget.trials)
        if with_arms
        else await anyio.to_thread.run_sync(
            settings_from_options, options, budget.trials, suite.project, host
        )
    )
    trials = max(settings.max_trials, budget.trials)
    return budget.model_copy(update={"trials": trials}), settings


async def _ready_host(
    host: Host | None,
    suite: Suite,
    options: RunOptions,
    on_event: ProgressCallback | None,
    leases: ExitStack,
) -> tuple[RunHost, IsolationSettings | None, LimitSettings]:
    """The run's host (the given one, the pinned managed copy, or the host on PATH), probed.

    A pinned copy is installed first when needed; then the isolation and limits
    (under ``os`` the preflight runs before the host is probed, and so does the
    proof that the per-trial limits can be enforced); a probed version that is
    not the pin is refused.
    """
    pin = host_pin(options.host_version, suite.project.eval)
    chosen = await run_host(host, suite.project.eval, pin, on_event=on_event, leases=leases)
    isolation = await resolve_isolation(options.isolation, suite.project.eval, chosen.host)
    limits = await resolve_limits_settings(options.isolation, suite.project.eval, options.limits)
    await chosen.host.probe()
    check_pinned_version(chosen)
    _check_pass_env(chosen.host, options.pass_env)
    return chosen, isolation, limits


def _check_pass_env(host: Host, names: Sequence[str]) -> None:
    """Refuse, before any trial, ``--pass-env`` names the host would refuse per trial."""
    if not names:
        return
    try:
        host.check_pass_env(list(names))
    except HostError as exc:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    str(exc),
                    next="remove that --pass-env name; see docs/hosts.md for the supported ones",
                )
            ]
        ) from None


def _model_notes(host: Host, model: str | None) -> list[Diagnostic]:
    """Warnings about ``eval.model`` for this host.

    Raises:
        DiagnosticError: the model cannot work with this host (exit 2).
    """
    notes = model_diagnostics(host.name, model, getattr(host, "dialect", None))
    if any(d.severity == "error" for d in notes):
        raise DiagnosticError(notes)
    return notes


@dataclass(frozen=True, slots=True)
class _Identity:
    """What a trial's fingerprint says it ran with: the run's host and model, or its arm's."""

    host: Host
    model: str | None
    arms: Mapping[str, ArmSetup]


def _fingerprints(
    plan: Plan, suite: Suite, identity: _Identity, watch: ProjectWatch
) -> tuple[dict[str, str], dict[str, str]]:
    """Snapshot the project's inputs; each scenario's fingerprint and definition digest.

    The fingerprint (for --resume) and the definition digest (for compare) reuse the
    snapshot's file digests: each fixture file is read once. With arms, every arm's
    trials of a scenario have their own fingerprint (keyed ``scenario@arm``; the
    control's by the scenario name): its host version, model and harness.
    """
    assert suite.native is not None
    watch.snapshot()
    timeouts = {t.scenario.name: t.timeout_ms for t in plan.trials}
    definitions = {
        scenario.name: definition_digest(scenario, fixture=watch.tree_digest(scenario.fixture_path))
        for scenario in plan.scenarios
    }
    fingerprints: dict[str, str] = {}
    for planned in plan.trials:
        if planned.key in fingerprints:
            continue
        scenario = planned.scenario
        setup = identity.arms.get(planned.variant or "")
        host = setup.host if setup is not None else identity.host
        fingerprints[planned.key] = scenario_fingerprint(
            scenario,
            manifest_digest=setup.native.digest if setup is not None else suite.native.digest,
            host=host.name,
            host_version=host.version,
            model=setup.model if setup is not None else identity.model,
            timeout_ms=timeouts.get(scenario.name, plan.config.timeout_ms),
            max_tokens=plan.config.max_tokens,
            definition=definitions[scenario.name],
        )
    return fingerprints, definitions


def _positions(
    plan: Plan, options: RunOptions, fingerprints: Mapping[str, str], split: ShardSplit | None
) -> tuple[list[int], dict[int, TrialResult]]:
    """The plan positions this run owns (``--shard``) and those ``--resume`` reuses."""
    positions = [t.position for t in plan.trials] if split is None else list(split.positions)
    if options.resume is None:
        return positions, {}
    return positions, _reusable(options.resume, plan, fingerprints, positions)


def _balance_history(suite: Suite, options: RunOptions) -> HistoryLocation | None:
    """The store ``--balance duration`` reads without ``--balance-from`` (None: not needed)."""
    if options.balance != "duration" or options.balance_from is not None or not options.history:
        return None
    return recording_for(suite.project, options).location


async def _owned(
    plan: Plan,
    options: RunOptions,
    fingerprints: Mapping[str, str],
    on_event: ProgressCallback | None,
    notices: list[Diagnostic],
    history: HistoryLocation | None,
) -> tuple[ShardSplit | None, list[int], dict[int, TrialResult]]:
    """The shard's split (announcing its warnings), its positions and the reused trials."""
    split = await anyio.to_thread.run_sync(shard_split, plan, options, history)
    notices.extend(await announce(on_event, split.notices if split is not None else ()))
    return split, *_positions(plan, options, fingerprints, split)


def _reusable(
    run_dir: Path, plan: Plan, fingerprints: Mapping[str, str], positions: list[int]
) -> dict[int, TrialResult]:
    """Trials of an earlier run that may stand: same fingerprint, a real verdict."""
    entries = {(e.scenario, e.index): e for e in read_journal(run_dir)}
    reused: dict[int, TrialResult] = {}
    for position in positions:
        planned = plan.trials[position]
        entry = entries.get((planned.key, planned.index))
        if entry is None or entry.fingerprint != fingerprints[planned.key]:
            continue
        if entry.result.verdict in ("infra-error", "skipped-budget"):
            continue
        reused[position] = entry.result.model_copy(update={"reused": True})
    return reused


def _driver(
    settings: AdaptiveSettings | None, plan: Plan, definitions: Mapping[str, str]
) -> WaveDriver | None:
    """The adaptive driver of an ``--until-decided`` run (imported only then): against
    BASE, or each arm against the control arm."""
    if settings is None:
        return None
    if plan.arms:
        from .adaptive_arms import ArmsDriver

        return ArmsDriver(settings, plan.scenarios, plan.arms)
    from .adaptive import AdaptiveDriver

    return AdaptiveDriver(settings, plan.scenarios, definitions)


def _budget_notes(
    plan: Plan, positions: list[int], reused: Mapping[int, TrialResult], *, adaptive: bool
) -> list[Diagnostic]:
    """The maxSessions warning when the plan asks for more sessions than it allows."""
    skips = 0 if adaptive else budget_skips(plan, positions, reused)
    return [_budget_warning(plan, len(positions), skips)] if skips else []


def _budget_warning(plan: Plan, planned: int, skips: int) -> Diagnostic:
    """``eval-sessions-exceed-budget``: how many trials maxSessions will skip."""
    limit = plan.config.max_sessions
    return warning(
        "eval-sessions-exceed-budget",
        f"{skips} of {planned} trial(s) will be skipped-budget: the plan needs "
        f"{len(plan.trials)} host sessions and eval.budget.maxSessions allows {limit}",
        next=f"raise eval.budget.maxSessions to {len(plan.trials)}, "
        "or run fewer trials (--trials, --scenario)",
    )


async def announce(
    on_event: ProgressCallback | None, notes: Sequence[Diagnostic]
) -> Sequence[Diagnostic]:
    """Send each diagnostic to the progress callback as a notice; return them."""
    for note in notes:
        await call_sink(on_event, DiagnosticNotice(note))
    return notes
