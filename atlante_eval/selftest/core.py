"""``atlante-eval selftest``: prove a suite is sound before paying a model to run it.

Every selected scenario runs through the real engine (sandbox, verified native
outputs, setup, baseline, checks, diff, report) with two built-in stand-in agents
instead of a coding-agent host:

* trial 0, the **null agent**, changes nothing. At least one check must fail on the
  untouched fixture; a scenario that passes anyway is *vacuous*, because an agent
  that does nothing would score 100% on it.
* trial 1, the **reference agent**, applies the scenario's reference solution (see
  :mod:`atlante_eval.selftest.solutions` for where solutions live) and then runs the
  scenario's ``command`` checks once, as an agent that tests its work would, so
  the files they leave behind are graded too. Every check must pass; a
  failing check, such as a ``diff-allowlist`` the solution itself violates, means
  no agent can pass the scenario as written. Scenarios without a solution run the
  null agent only, with a ``selftest-no-solution`` warning.

Setup failures and checks that reach no verdict (a bad path, a missing tool) are
reported too (:mod:`atlante_eval.selftest.findings` turns trials into findings).
Both trials of every scenario go into one report, published like a run's with
``meta.host`` ``"selftest"`` and each trial's ``hostEvidence.agent`` naming its
agent; the analysis is written beside it as ``selftest.json``. No model,
credentials, host CLI or network is needed.
"""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from .._util.fstree import RemovalFailure
from .._util.paths import UnsafePathError
from .._version import __version__
from ..checks import CheckContext, run_checks
from ..choices import DEFAULT_SELFTEST_JOBS, SELFTEST_HOST
from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from ..hosts.base import SessionEnd, SessionUsage, TrialContext
from ..project import CommandCheck, Plan, PlannedTrial, Scenario, Suite, load_suite, resolve_budget
from ..report import (
    CheckResult,
    Meta,
    ProgressEvent,
    RunReport,
    ScenarioResult,
    TrialResult,
    utc_timestamp,
)
from ..run.engine import Engine, EngineOptions
from ..run.isolate import isolation_mode, resolve_isolation, resolve_limits_settings
from ..run.lifecycle import ActiveRun, cleanup_warning, run_lifecycle
from ..run.metering import GatewayRun, run_gateway, with_gateway
from ..run.options import gateway_mode
from ..run.pinning import host_pin, pin_option
from ..run.summary import scenario_result
from ..transcript import ErrorEntry, ResultEntry, SessionStartEntry, ToolCallEntry, TranscriptEntry
from ..trial.finalstate import StateSettings
from .findings import (
    NULL_TRIAL,
    REFERENCE_TRIAL,
    AgentName,
    AgentOutcome,
    Role,
    ScenarioSelftest,
    SelftestResult,
    analyse,
    describe_check,
)
from .mutants import apply_mutant, generic_mutants
from .regradable import merge_findings, regrade_proving_trials
from .solutions import Solution, SolutionError, SolutionSearch, apply_solution, find_solutions

__all__ = [
    "DEFAULT_SELFTEST_JOBS",
    "NULL_TRIAL",
    "REFERENCE_TRIAL",
    "SELFTEST_HOST",
    "AgentName",
    "AgentOutcome",
    "NullAgent",
    "Role",
    "ScenarioSelftest",
    "SelftestHost",
    "SelftestOutcome",
    "SelftestResult",
    "SolutionAgent",
    "describe_check",
    "plan_roles",
    "run_selftest",
]

TrialCallback = Callable[[str, AgentName, TrialResult], object]
#: The selftest's page, written beside its report and ``selftest.json``.
SELFTEST_PAGE = "selftest.html"


class NullAgent:
    """A stand-in agent that changes nothing: its session ends at once."""

    name = "null"
    version: str | None = __version__
    ignored_changes: Sequence[str] = ()

    async def probe(self) -> None:
        """Nothing to probe: the null agent is always available."""

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        """Accept every name: the null agent reads no environment."""

    def prepare(self, context: TrialContext) -> None:
        """Write nothing: the sandbox stays exactly as the fixture and the build left it."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """End the session without touching the sandbox (and without spending a token)."""
        usage.observe_tokens(0)
        usage.observe_cost(0.0)
        _transcribe(context, "null", [])
        return SessionEnd(evidence={"agent": "null"})


class SolutionAgent:
    """A stand-in agent that applies a solution (and a mutant) to the sandbox.

    After the solution, like a real agent that tests its work, it runs the
    scenario's ``command`` checks once (their verdicts are ignored here), so files
    those commands create (``__pycache__/*.pyc``, build output) are in the sandbox
    when ``diff-allowlist`` grades it, as they are after a real trial. A mutant is
    applied last. The solution's ``transcript.jsonl``, when it has one, becomes the
    trial's transcript.
    """

    async def run_session(
        self, role: Role, context: TrialContext, usage: SessionUsage
    ) -> SessionEnd:
        """Apply the role's solution, run the command checks, then apply its mutant."""
        usage.observe_tokens(0)
        usage.observe_cost(0.0)
        solution, agent = role.solution, role.agent
        evidence: dict[str, Any] = {"agent": agent}
        if role.label is not None:
            evidence["label"] = role.label
        counts: dict[str, int] = {}
        if solution is not None:
            evidence["solution"] = solution.label
            try:
                counts = await anyio.to_thread.run_sync(apply_solution, solution, context.sandbox)
            except SolutionError as exc:
                _transcribe(context, agent, [], error=str(exc))
                return SessionEnd(
                    error=f"the {agent} solution could not be applied: {exc}",
                    evidence={**evidence, "applyError": str(exc)},
                )
        commands = [c for c in context.scenario.document.checks if isinstance(c, CommandCheck)]
        ran = (
            await run_checks(
                commands, CheckContext(root=context.sandbox, snapshot={}, changes=None)
            )
            if commands and solution is not None and not solution.no_change
            else []
        )
        if ran:
            evidence["commandsRun"] = len(ran)
        if role.mutant is not None:
            try:
                evidence["mutation"] = await anyio.to_thread.run_sync(
                    apply_mutant, role.mutant, context.sandbox
                )
            except (OSError, UnsafePathError) as exc:
                _transcribe(context, agent, [], error=str(exc))
                return SessionEnd(
                    error=f"the mutant {role.mutant.label} could not be applied: {exc}",
                    evidence={**evidence, "applyError": str(exc)},
                )
        mutation = _mutation_call(role, context)
        if solution is not None and solution.transcript is not None:
            _replay(context, agent, [*solution.transcript, *mutation])
            evidence["transcript"] = "solution"
        else:
            _transcribe(
                context,
                agent,
                [*solution.delete, *solution.files] if solution is not None else [],
                deleted=len(solution.delete) if solution is not None else 0,
                commands=[(c.run, r) for c, r in zip(commands, ran, strict=False)],
                extra=mutation,
            )
        return SessionEnd(evidence={**evidence, **counts})


def _mutation_call(role: Role, context: TrialContext) -> list[TranscriptEntry]:
    """The mutant's change as a write tool call (none without a mutant)."""
    mutant = role.mutant
    if mutant is None or context.transcript is None:
        return []
    return [
        ToolCallEntry(
            t=context.transcript.elapsed_ms(),
            id="mutant-0",
            name="delete" if mutant.kind == "delete-exists" else "write",
            tool_kind="write",
            input={"path": mutant.path},
            output=mutant.kind,
            duration_ms=0,
        )
    ]


def _replay(context: TrialContext, agent: AgentName, entries: Sequence[TranscriptEntry]) -> None:
    """Write the entries a solution carries as the trial's transcript."""
    transcript = context.transcript
    if transcript is None:
        return
    t = transcript.elapsed_ms()
    if not any(isinstance(e, SessionStartEntry) for e in entries):
        transcript.write(
            SessionStartEntry(t=t, host=SELFTEST_HOST, version=__version__, agents=[agent])
        )
    for entry in entries:
        transcript.write(entry)
    if not any(isinstance(e, ResultEntry) for e in entries):
        transcript.write(ResultEntry(t=t, status="success", turns=0, tokens=0, cost_usd=0.0))


def _transcribe(
    context: TrialContext,
    agent: AgentName,
    paths: Sequence[str],
    *,
    deleted: int = 0,
    error: str | None = None,
    commands: Sequence[tuple[Sequence[str], CheckResult]] = (),
    extra: Sequence[TranscriptEntry] = (),
) -> None:
    """Write the stand-in agent's synthetic session: start, file changes, commands, result."""
    transcript = context.transcript
    if transcript is None:
        return
    t = transcript.elapsed_ms()
    transcript.write(
        SessionStartEntry(t=t, host=SELFTEST_HOST, version=__version__, agents=[agent])
    )
    for number, path in enumerate(paths):
        removed = number < deleted
        transcript.write(
            ToolCallEntry(
                t=t,
                id=f"{agent}-{number}",
                name="delete" if removed else "write",
                tool_kind="write",
                input={"path": path},
                output="deleted" if removed else "written",
                duration_ms=0,
            )
        )
    for number, (argv, outcome) in enumerate(commands):
        transcript.write(
            ToolCallEntry(
                t=t,
                id=f"{agent}-run-{number}",
                name="bash",
                tool_kind="shell",
                input={"command": shlex.join(argv)},
                output=f"exit {outcome.evidence.get('exit')}",
                duration_ms=outcome.duration_ms,
            )
        )
    for entry in extra:
        transcript.write(entry)
    if error is not None:
        transcript.write(ErrorEntry(t=t, message=error))
    transcript.write(
        ResultEntry(t=t, status="error" if error else "success", turns=0, tokens=0, cost_usd=0.0)
    )


class SelftestHost:
    """The host of a selftest run: each trial's :class:`Role` picks its stand-in agent.

    Trial 0 is the null agent, trial 1 the reference agent; later trials apply the
    counter-solutions, then the generic mutants. It writes nothing in
    :meth:`prepare` and leaves no runtime artefacts, so ``diff-allowlist`` ignores
    nothing: every path a solution changes must be allowed.
    """

    name = SELFTEST_HOST
    version: str | None = __version__
    ignored_changes: Sequence[str] = ()

    def __init__(self, roles: Mapping[tuple[str, int], Role]) -> None:
        self.roles = dict(roles)
        self.null = NullAgent()
        self.solver = SolutionAgent()

    async def probe(self) -> None:
        """Nothing to probe: no model, credentials or host CLI is involved."""

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        """Accept every name: selftest passes no environment to an agent."""

    def prepare(self, context: TrialContext) -> None:
        """Write nothing."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Run the agent the trial's role selects."""
        role = self.roles.get((context.scenario.name, context.trial))
        if role is None:
            return SessionEnd(error=f"selftest has no agent for trial {context.trial}")
        if role.agent == "null" and role.solution is None:
            return await self.null.run_session(context, usage)
        return await self.solver.run_session(role, context, usage)


def plan_roles(scenario: Scenario, solution: Solution | None) -> dict[int, Role]:
    """The trials selftest runs for ``scenario``, by trial index.

    0: the null agent; 1: the reference agent (with a solution that changes
    something); from 2: each counter-solution, then each generic mutant (applied
    after the reference solution, or after nothing for a no-change scenario;
    none without a reference).
    """
    roles: dict[int, Role] = {NULL_TRIAL: Role("null")}
    if solution is None:
        return roles
    if solution.no_change:
        roles[NULL_TRIAL] = Role("null", solution)  # its transcript.jsonl, if any
    else:
        roles[REFERENCE_TRIAL] = Role("reference", solution)
    index = REFERENCE_TRIAL + 1
    for counter in solution.counters:
        roles[index] = Role("counter", counter)
        index += 1
    base = None if solution.no_change else solution
    for mutant in generic_mutants(list(scenario.document.checks)):
        roles[index] = Role("mutant", base, mutant)
        index += 1
    return roles


def _plan(
    suite: Suite, solutions: Mapping[str, Solution]
) -> tuple[Plan, dict[tuple[str, int], Role]]:
    config = resolve_budget(suite.project.eval.budget, trials=1)
    ordered = tuple(sorted(suite.scenarios, key=lambda s: s.name))
    trials: list[PlannedTrial] = []
    roles: dict[tuple[str, int], Role] = {}
    most = 1
    for scenario in ordered:
        budget = scenario.document.budget
        timeout_ms = budget.timeout_ms if budget is not None else config.timeout_ms
        planned = plan_roles(scenario, solutions.get(scenario.name))
        most = max(most, len(planned))
        for index, role in planned.items():
            roles[(scenario.name, index)] = role
            trials.append(PlannedTrial(len(trials), scenario, index, timeout_ms))
    config = config.model_copy(update={"trials": most, "max_sessions": max(1, len(trials))})
    return Plan(trials=tuple(trials), config=config, scenarios=ordered), roles


@dataclass(frozen=True, slots=True)
class SelftestOutcome:
    """A published selftest: its analysis, the run report, and where both are."""

    result: SelftestResult
    report: RunReport
    report_path: Path
    result_path: Path

    @property
    def exit_code(self) -> int:
        """0 when the suite is sound, 1 otherwise."""
        return self.result.exit_code


def _check_options(jobs: int | None, solutions: Path | str | None) -> tuple[int, Path | None]:
    if jobs is None:
        jobs = DEFAULT_SELFTEST_JOBS
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise DiagnosticError(
            [error("invalid-option", f"--jobs must be a positive integer, got {jobs}")]
        )
    if solutions is None:
        return jobs, None
    directory = Path(solutions)
    if not directory.is_dir():
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"--solutions must be an existing directory, got {solutions}",
                    next="pass the directory that holds one sub-directory per scenario name",
                )
            ]
        )
    return jobs, directory.absolute()


async def _notify(callback: TrialCallback | None, *args: Any) -> None:
    if callback is None:
        return
    outcome = callback(*args)
    if inspect.isawaitable(outcome):
        await outcome


async def run_selftest(
    path: Path | str | None = None,
    *,
    scenarios: Sequence[str] = (),
    solutions: Path | str | None = None,
    jobs: int | None = None,
    out: Path | str | None = None,
    keep: bool = False,
    on_trial: TrialCallback | None = None,
    isolation: str | None = None,
    gateway: str | None = None,
    host_version: str | None = None,
) -> SelftestOutcome:
    """Selftest the suite of the project at ``path`` and publish the report.

    Args:
        path: project directory or its configuration file (default: cwd).
        scenarios: selftest only these scenario names (glob patterns allowed).
        solutions: directory holding one solution directory per scenario name,
            instead of ``solutions/`` beside each scenario document.
        jobs: trials run at once (default :data:`DEFAULT_SELFTEST_JOBS`).
        out: report base directory instead of ``<project>/.atlante/eval``.
        keep: keep the trial sandboxes (their paths are recorded in the report).
        on_trial: called (sync or async) with the scenario name, the agent and the
            trial's result as each trial finishes.
        isolation: ``"none"`` or ``"os"``, overriding ``eval.isolation``: ``os``
            confines setup and command checks (docs/isolation.md).
        gateway: ``"on"`` or ``"off"``, overriding ``eval.gateway``: start the model
            gateway for the trials (the stand-in agents make no model call, so their
            figures are their own; docs/gateway.md).
        host_version: a host version pin, checked as ``run`` checks it
            (``invalid-host-version``); no host runs, so nothing is installed.

    Returns:
        The analysis, the report and their paths; ``exit_code`` is 0 when the suite
        is sound and 1 when a scenario is vacuous, its solution fails or is invalid,
        its setup fails or a check reaches no verdict.

    Raises:
        DiagnosticError: validation failed (exit 2) or the report could not be
            written (exit 3) or ``os`` isolation is unavailable (3).
    """
    job_count, solutions_dir = _check_options(jobs, solutions)
    mode = isolation_mode(isolation)
    requested_gateway = gateway_mode(gateway)
    requested = pin_option(host_version)
    suite = load_suite(path, scenario_filter=list(scenarios))
    host_pin(requested, suite.project.eval)  # checked as a run checks it; no host runs
    found = find_solutions(suite, solutions_dir)
    plan, roles = _plan(suite, found.found)
    host = SelftestHost(roles)
    settings = await resolve_isolation(mode, suite.project.eval, host)
    limits = await resolve_limits_settings(mode, suite.project.eval)
    trials = _Trials(plan, roles, on_trial)
    meta = _meta(suite, plan, jobs=job_count, isolated=settings is not None)
    started: list[GatewayRun] = []

    async def finish() -> dict[str, object]:
        return {"gateway": started[0].summary()} if started else {}

    async with (
        run_lifecycle(
            project_root=suite.project.root,
            out=Path(out) if out is not None else None,
            meta=meta.model_copy(update={"limits": limits.record()}),
            keep=keep,
            results=trials.scenario_results,
            partial=False,  # a selftest that did not finish has nothing to judge
            finish=finish,
        ) as run,
        run_gateway(requested_gateway or suite.project.eval.gateway) as gateway_run,
    ):
        started.extend([gateway_run] if gateway_run is not None else [])
        assert suite.native is not None
        options = EngineOptions(
            jobs=job_count,
            keep=keep,
            run_files=run.files,
            isolation=with_gateway(settings, gateway_run),
            limits=limits,
            gateway=gateway_run,
            final_state=StateSettings(native_digest=suite.native.digest),
        )
        engine = _engine(suite, host, trials, run, options)
        await engine.run()
        regrades = await regrade_proving_trials(
            trials.plan,
            trials.results,
            trials.roles,
            run=run,
            native=suite.native,
            isolation=settings,
            limits=limits,
        )
    return _judged(run, suite, trials, found, regrades)


@dataclass
class _Trials:
    """The selftest's trials as they finish: each result by plan position."""

    plan: Plan
    roles: Mapping[tuple[str, int], Role]
    on_trial: TrialCallback | None
    results: dict[int, TrialResult] = field(default_factory=dict)

    async def record(self, planned: PlannedTrial, result: TrialResult) -> None:
        """Keep a finished trial's result and tell the caller which agent it was."""
        self.results[planned.position] = result
        role = self.roles.get((planned.scenario.name, planned.index))
        agent: AgentName = role.agent if role is not None else "null"
        await _notify(self.on_trial, planned.scenario.name, agent, result)

    def scenario_results(self, _stopped: bool) -> dict[str, ScenarioResult]:
        """Every scenario's result (a selftest's report is only published complete)."""
        by_name: dict[str, list[TrialResult]] = {}
        for planned in self.plan.trials:
            by_name.setdefault(planned.scenario.name, []).append(self.results[planned.position])
        return {s.name: scenario_result(s, by_name[s.name]) for s in self.plan.scenarios}


def _meta(suite: Suite, plan: Plan, *, jobs: int, isolated: bool) -> Meta:
    """The selftest report's metadata before it starts (the lifecycle adds the end)."""
    assert suite.native is not None
    return Meta(
        atlante=__version__,
        host=SELFTEST_HOST,
        model="none",
        model_version="none",
        config=plan.config,
        host_version=SelftestHost.version,
        started_at=utc_timestamp(),
        jobs=jobs,
        manifest_digest=suite.native.digest,
        isolation="os" if isolated else None,
    )


def _engine(
    suite: Suite, host: SelftestHost, trials: _Trials, run: ActiveRun, options: EngineOptions
) -> Engine:
    """The engine running each trial's stand-in agent in the run's root."""
    assert suite.native is not None

    async def ignore(_event: ProgressEvent) -> None:
        return None

    return Engine(
        plan=trials.plan,
        host=host,
        native=suite.native,
        run_root=run.run_root,
        options=options,
        emit=ignore,
        on_trial=trials.record,
        cleanup_failures=run.cleanup_failures,
    )


def _judged(
    run: ActiveRun,
    suite: Suite,
    trials: _Trials,
    found: SolutionSearch,
    regrades: Mapping[str, Diagnostic],
) -> SelftestOutcome:
    """Analyse the published report's trials; publish the analysis as ``selftest.json``."""
    report, report_path = run.report, run.report_path
    assert report is not None
    assert report_path is not None
    judged, diagnostics = merge_findings(
        *analyse(trials.plan, trials.results, found, trials.roles), regrades
    )
    failed = any(d.severity == "error" for d in diagnostics)
    result = SelftestResult(
        ok=not failed,
        exit_code=1 if failed else 0,
        run_id=run.run_id,
        report=str(report_path),
        scenarios=judged,
        diagnostics=[*suite.warnings, *diagnostics, *_left_behind(run.cleanup_failures)],
    )
    problems = _publish_page(run, report, result)
    if problems:
        result = result.model_copy(update={"diagnostics": [*result.diagnostics, *problems]})
    result_path = run.publish("selftest.json", result.to_json().encode("utf-8"))
    return SelftestOutcome(
        result=result, report=report, report_path=report_path, result_path=result_path
    )


def _publish_page(run: ActiveRun, report: RunReport, result: SelftestResult) -> list[Diagnostic]:
    """Publish ``selftest.html`` beside the report; a failure is a warning, not a lost selftest."""
    from ..views.html import render_selftest_html

    page = render_selftest_html(
        report,
        run_dir=run.run_dir,
        links_from=run.run_dir,
        analysis=result.model_dump(mode="json", by_alias=True),
    )
    try:
        run.publish(SELFTEST_PAGE, page)
    except DiagnosticError as exc:
        return [
            warning(
                problem.code,
                f"{SELFTEST_PAGE} not written: {problem.message}",
                source=problem.source,
                next=problem.next,
            )
            for problem in exc.diagnostics
        ]
    return []


def _left_behind(failures: Sequence[RemovalFailure]) -> list[Diagnostic]:
    """The ``eval-cleanup-failed`` warning, when sandboxes were left behind."""
    notice = cleanup_warning(failures)
    return [] if notice is None else [notice]
