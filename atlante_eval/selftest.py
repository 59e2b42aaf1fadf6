"""``atlante-eval selftest``: prove a suite is sound before paying a model to run it.

Every selected scenario runs through the real engine (sandbox, verified native
outputs, setup, baseline, checks, diff, report) with two built-in stand-in agents
instead of a coding-agent host:

* trial 0, the **null agent**, changes nothing. At least one check must fail on the
  untouched fixture; a scenario that passes anyway is *vacuous*, because an agent
  that does nothing would score 100% on it.
* trial 1, the **reference agent**, applies the scenario's reference solution (see
  :mod:`atlante_eval.solutions` for where solutions live). Every check must pass; a
  failing check, such as a ``diff-allowlist`` the solution itself violates, means
  no agent can pass the scenario as written. Scenarios without a solution run the
  null agent only, with a ``selftest-no-solution`` warning.

Setup failures and checks that reach no verdict (a bad path, a missing tool) are
reported too. Both trials of every scenario go into one report, published like a
run's with ``meta.host`` ``"selftest"`` and each trial's ``hostEvidence.agent``
naming its agent; the analysis is written beside it as ``selftest.json``. No model,
credentials, host CLI or network is needed.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from ._version import __version__
from .diagnostics import Diagnostic, DiagnosticError, Location, error, warning
from .engine import Engine, EngineOptions
from .events import ProgressEvent
from .hosts.base import SessionEnd, SessionUsage, TrialContext
from .jsondoc import locate_pointers
from .plan import Plan, PlannedTrial, resolve_budget
from .publish import (
    PublishError,
    atomic_write,
    ensure_gitignore,
    new_run_id,
    publish_error,
    reserve_run_dir,
)
from .report import CheckResult, Meta, RunReport, TrialResult, Verdict
from .results import finalize, scenario_result
from .sandbox import create_run_root, remove_tree
from .scenarios import Check, CommandCheck, DiffAllowlistCheck, FileContainsCheck, Scenario
from .solutions import (
    Solution,
    SolutionError,
    apply_solution,
    display_path,
    load_solution,
    solution_bases,
    solution_directory,
    unknown_solution_warnings,
)
from .suite import Suite, load_suite

__all__ = [
    "DEFAULT_SELFTEST_JOBS",
    "NULL_TRIAL",
    "REFERENCE_TRIAL",
    "SELFTEST_HOST",
    "AgentName",
    "AgentOutcome",
    "NullAgent",
    "ReferenceAgent",
    "ScenarioSelftest",
    "SelftestHost",
    "SelftestOutcome",
    "SelftestResult",
    "describe_check",
    "run_selftest",
]

#: ``meta.host`` of a selftest report.
SELFTEST_HOST = "selftest"
#: Trial index of the null agent in each scenario.
NULL_TRIAL = 0
#: Trial index of the reference agent in each scenario (only when it has a solution).
REFERENCE_TRIAL = 1
#: Trials run at once by default: the stand-in agents are instant, the checks are not.
DEFAULT_SELFTEST_JOBS = 4
#: Characters of command output quoted in a finding.
_OUTPUT_CHARS = 600

AgentName = Literal["null", "reference"]
TrialCallback = Callable[[str, AgentName, TrialResult], object]


class NullAgent:
    """A stand-in agent that changes nothing: its session ends at once."""

    name = "null"
    version: str | None = __version__
    ignored_changes: Sequence[str] = ()

    async def probe(self) -> None:
        """Nothing to probe: the null agent is always available."""

    def prepare(self, context: TrialContext) -> None:
        """Write nothing: the sandbox stays exactly as the fixture and the build left it."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """End the session without touching the sandbox (and without spending a token)."""
        usage.observe_tokens(0)
        usage.observe_cost(0.0)
        return SessionEnd(evidence={"agent": "null"})


class ReferenceAgent:
    """A stand-in agent that applies each scenario's reference solution to the sandbox."""

    name = "reference"
    version: str | None = __version__
    ignored_changes: Sequence[str] = ()

    def __init__(self, solutions: Mapping[str, Solution]) -> None:
        self.solutions = dict(solutions)

    async def probe(self) -> None:
        """Nothing to probe: solutions were validated when they were found."""

    def prepare(self, context: TrialContext) -> None:
        """Write nothing before the baseline: the solution is the agent's work."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Delete the solution's listed paths and copy its files into the sandbox."""
        usage.observe_tokens(0)
        usage.observe_cost(0.0)
        solution = self.solutions.get(context.scenario.name)
        if solution is None:
            return SessionEnd(
                error=f'no reference solution for "{context.scenario.name}"',
                evidence={"agent": "reference"},
            )
        evidence: dict[str, Any] = {"agent": "reference", "solution": solution.label}
        try:
            counts = await anyio.to_thread.run_sync(apply_solution, solution, context.sandbox)
        except SolutionError as exc:
            return SessionEnd(
                error=f"the reference solution could not be applied: {exc}",
                evidence={**evidence, "applyError": str(exc)},
            )
        return SessionEnd(evidence={**evidence, **counts})


class SelftestHost:
    """The host of a selftest run: trial 0 is the null agent, trial 1 the reference agent.

    It writes nothing in :meth:`prepare` and leaves no runtime artefacts, so
    ``diff-allowlist`` ignores nothing: every path a solution changes must be allowed.
    """

    name = SELFTEST_HOST
    version: str | None = __version__
    ignored_changes: Sequence[str] = ()

    def __init__(self, solutions: Mapping[str, Solution]) -> None:
        self.null = NullAgent()
        self.reference = ReferenceAgent(solutions)

    async def probe(self) -> None:
        """Nothing to probe: no model, credentials or host CLI is involved."""

    def prepare(self, context: TrialContext) -> None:
        """Write nothing."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Run the agent the trial index selects."""
        if context.trial == NULL_TRIAL:
            return await self.null.run_session(context, usage)
        if context.trial == REFERENCE_TRIAL:
            return await self.reference.run_session(context, usage)
        return SessionEnd(error=f"selftest has no agent for trial {context.trial}")


class _SelftestModel(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


class AgentOutcome(_SelftestModel):
    """What one stand-in agent's trial came to."""

    verdict: Verdict
    """The trial's verdict in the report."""
    failed_checks: list[int]
    """Indexes of the checks that failed."""
    errored_checks: list[int]
    """Indexes of the checks that reached no verdict."""
    error: str | None = None
    """The trial's error text (setup failure, solution not applied, ...)."""


class ScenarioSelftest(_SelftestModel):
    """The selftest's judgement of one scenario."""

    ok: bool
    """No error was found for this scenario."""
    checks: int
    """Number of checks in the scenario document."""
    solution: str | None
    """The reference solution directory used (``None``: there is none)."""
    null_agent: AgentOutcome | None
    """Trial 0; ``None`` only when it never ran."""
    reference_agent: AgentOutcome | None
    """Trial 1; ``None`` without a valid solution."""
    findings: list[str]
    """Codes of the diagnostics about this scenario, errors and warnings."""


class SelftestResult(_SelftestModel):
    """The analysis of a selftest run (``selftest.json`` beside ``report.json``)."""

    ok: bool
    """Every scenario is sound (warnings allowed)."""
    exit_code: int
    """0 sound, 1 a scenario is vacuous, its solution fails, or it cannot run."""
    run_id: str
    """Run id of the report."""
    report: str
    """Path of ``report.json``."""
    scenarios: dict[str, ScenarioSelftest]
    """Per-scenario judgement, in name order."""
    diagnostics: list[Diagnostic]
    """Every finding, errors and warnings."""

    def to_json(self) -> str:
        """Serialise as 2-space JSON with a trailing newline."""
        return self.model_dump_json(by_alias=True, exclude_none=True, indent=2) + "\n"


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


def describe_check(check: Check) -> str:
    """A short human label for a check, e.g. ``command python3 -m unittest``."""
    if isinstance(check, CommandCheck):
        return "command " + " ".join(check.run)
    if isinstance(check, DiffAllowlistCheck):
        count = len(check.allow)
        return f"diff-allowlist of {count} path{'s' if count != 1 else ''}"
    return f"{check.type} {check.path}"


def _location(scenario: Scenario, pointer: str) -> Location | None:
    if not scenario.text:
        return None
    try:
        position = locate_pointers(scenario.text).get(pointer)
    except Exception:  # noqa: BLE001 - a position is a nicety; never fail a finding over it
        return None
    return Location(line=position[0], column=position[1]) if position else None


def _at(scenario: Scenario, pointer: str) -> dict[str, Any]:
    return {
        "source": scenario.source,
        "pointer": pointer,
        "location": _location(scenario, pointer),
    }


def _outcome(result: TrialResult | None) -> AgentOutcome | None:
    if result is None:
        return None
    checks = result.checks or []
    return AgentOutcome(
        verdict=result.verdict,
        failed_checks=[c.index for c in checks if c.verdict == "fail"],
        errored_checks=[c.index for c in checks if c.verdict == "error"],
        error=result.error,
    )


def _evidence_summary(check: Check, result: CheckResult) -> str:
    evidence = result.evidence
    if isinstance(check, CommandCheck):
        parts = [f"exit {evidence.get('exit')}, expected {evidence.get('expectExit')}"]
        if evidence.get("timedOut"):
            parts.append(f"timed out after {check.timeout_ms}ms")
        if "outputMatches" in evidence and evidence.get("exit") == evidence.get("expectExit"):
            parts.append(f"output does not match {check.output_matches!r}")
        output = str(evidence.get("output", ""))[-_OUTPUT_CHARS:]
        if output:
            parts.append(f"output: {output}")
        return "; ".join(parts)
    if isinstance(check, FileContainsCheck):
        if "exists" in evidence:
            return f"{check.path} is not a regular file" + (
                "" if evidence["exists"] else " (it does not exist)"
            )
        return f"{check.path} does not contain {check.pattern!r}"
    if check.type in ("file-exists", "file-absent"):
        return f"{check.path} {'exists' if evidence.get('exists') else 'does not exist'}"
    if check.type == "file-unchanged":
        return f"{check.path} changed"
    return json.dumps(evidence, ensure_ascii=False)[:_OUTPUT_CHARS]


def _assembly_failure(result: TrialResult) -> bool:
    return result.verdict == "infra-error" and result.checks is None and not result.host_evidence


def _setup_findings(
    scenario: Scenario, null: TrialResult | None, reference: TrialResult | None
) -> list[Diagnostic]:
    failed = [
        (agent, r)
        for agent, r in (("null", null), ("reference", reference))
        if r is not None and _assembly_failure(r)
    ]
    if not failed:
        return []
    messages = {r.error for _, r in failed}
    agents = " and ".join(f"{a} agent" for a, _ in failed)
    text = failed[0][1].error or "unknown error"
    pointer = "/task/setup" if text.startswith("setup ") else "/task/fixture"
    if len(messages) > 1:
        text = "; ".join(f"{a} agent: {r.error}" for a, r in failed)
    return [
        error(
            "selftest-setup-failed",
            f'scenario "{scenario.name}": the sandbox could not be assembled for the {agents}',
            cause=text,
            next="fix the fixture or task.setup so it works on a fresh copy of the fixture",
            **_at(scenario, pointer),
        )
    ]


def _check_error_findings(
    scenario: Scenario, null: TrialResult | None, reference: TrialResult | None
) -> list[Diagnostic]:
    seen: dict[tuple[int, str], list[str]] = {}
    for agent, result in (("null", null), ("reference", reference)):
        if result is None:
            continue
        errored = [c for c in result.checks or [] if c.verdict == "error"]
        for outcome in errored:
            cause = str(outcome.evidence.get("cause", "no verdict"))
            seen.setdefault((outcome.index, cause), []).append(agent)
        graded = result.checks is not None and result.verdict == "infra-error"
        if graded and not errored and result.error:
            seen.setdefault((-1, result.error), []).append(agent)
    findings = []
    for (index, cause), agents in seen.items():
        who = " and ".join(f"{a} agent" for a in agents)
        if index < 0:
            findings.append(
                error(
                    "selftest-check-error",
                    f'scenario "{scenario.name}": the trial could not be graded with the {who}',
                    cause=cause,
                    next="check that git works in the sandbox, then run selftest again",
                    source=scenario.source,
                )
            )
            continue
        check = scenario.document.checks[index]
        findings.append(
            error(
                "selftest-check-error",
                f'scenario "{scenario.name}": check {index} ({describe_check(check)}) '
                f"reached no verdict with the {who}",
                cause=cause,
                next="fix the check: a program on PATH, a path that stays inside the sandbox "
                "without symbolic links, a readable file",
                **_at(scenario, f"/checks/{index}"),
            )
        )
    return findings


def _vacuity_findings(scenario: Scenario, null: TrialResult | None) -> list[Diagnostic]:
    if null is None or null.verdict != "pass":
        return []
    labels = "; ".join(
        f"{i} {describe_check(check)}" for i, check in enumerate(scenario.document.checks)
    )
    return [
        error(
            "selftest-vacuous",
            f'scenario "{scenario.name}" is vacuous: it passes with the null agent, which '
            f"changes nothing (checks: {labels})",
            expected="at least one check that fails until the task is done",
            next="add a check that only the finished task satisfies, e.g. file-contains on "
            "the file the agent must write, or a command that runs the fixture's tests",
            **_at(scenario, "/checks"),
        )
    ]


def _solution_findings(
    scenario: Scenario, solution: Solution, reference: TrialResult | None
) -> list[Diagnostic]:
    if reference is None:
        return []
    evidence = reference.host_evidence or {}
    if "applyError" in evidence:
        return [
            error(
                "selftest-solution-invalid",
                f'the reference solution of "{scenario.name}" could not be applied',
                source=solution.label,
                cause=str(evidence["applyError"]),
                next="fix the solution's files/ or delete.json (see docs/writing-scenarios.md)",
            )
        ]
    if reference.verdict not in ("fail", "pass") and reference.checks is None:
        if _assembly_failure(reference):
            return []  # reported as selftest-setup-failed
        return [
            error(
                "selftest-solution-failed",
                f'the reference solution of "{scenario.name}" did not complete: '
                f"{reference.verdict}",
                source=solution.label,
                cause=reference.error,
            )
        ]
    findings = []
    for result in reference.checks or []:
        if result.verdict != "fail":
            continue
        check = scenario.document.checks[result.index]
        if isinstance(check, DiffAllowlistCheck):
            unexpected = ", ".join(result.evidence.get("unexpected", []))
            findings.append(
                error(
                    "selftest-solution-failed",
                    f'scenario "{scenario.name}": the reference solution changes paths outside '
                    f"the diff-allowlist of check {result.index}: {unexpected}",
                    expected="every path the solution changes is in allow",
                    next="add the paths to allow if the task needs them, or take them out of "
                    f"the solution ({solution.label})",
                    **_at(scenario, f"/checks/{result.index}"),
                )
            )
            continue
        findings.append(
            error(
                "selftest-solution-failed",
                f'scenario "{scenario.name}": the reference solution fails check {result.index} '
                f"({describe_check(check)})",
                cause=_evidence_summary(check, result),
                next=f"fix the solution ({solution.label}) or the check",
                **_at(scenario, f"/checks/{result.index}"),
            )
        )
    return findings


@dataclass(frozen=True, slots=True)
class _Solutions:
    found: dict[str, Solution]
    invalid: dict[str, Diagnostic]
    missing: dict[str, str]
    """Scenario name -> where its solution was looked for."""
    warnings: list[Diagnostic]


def _find_solutions(suite: Suite, solutions: Path | None) -> _Solutions:
    root = suite.project.root
    found: dict[str, Solution] = {}
    invalid: dict[str, Diagnostic] = {}
    missing: dict[str, str] = {}
    for scenario in suite.scenarios:
        directory = solution_directory(scenario, solutions)
        label = display_path(directory, root)
        try:
            solution = load_solution(directory, scenario=scenario.name, label=label)
        except SolutionError as exc:
            invalid[scenario.name] = error(
                "selftest-solution-invalid",
                f'the reference solution of "{scenario.name}" is invalid: {exc}',
                source=label,
                expected="a directory with files/ (a tree to copy) and/or delete.json "
                "(an array of paths)",
                next="fix the solution directory (see docs/writing-scenarios.md)",
            )
            continue
        if solution is None:
            missing[scenario.name] = label
        else:
            found[scenario.name] = solution
    names = {s.name for s in suite.discovered}
    stray = unknown_solution_warnings(solution_bases(suite.discovered, solutions), names, root=root)
    return _Solutions(found=found, invalid=invalid, missing=missing, warnings=stray)


def _analyse(
    plan: Plan, results: Mapping[int, TrialResult], solutions: _Solutions
) -> tuple[dict[str, ScenarioSelftest], list[Diagnostic]]:
    by_trial = {(t.scenario.name, t.index): results.get(t.position) for t in plan.trials}
    scenarios: dict[str, ScenarioSelftest] = {}
    everything: list[Diagnostic] = []
    for scenario in plan.scenarios:
        name = scenario.name
        null = by_trial.get((name, NULL_TRIAL))
        reference = by_trial.get((name, REFERENCE_TRIAL))
        solution = solutions.found.get(name)
        findings: list[Diagnostic] = []
        if name in solutions.invalid:
            findings.append(solutions.invalid[name])
        findings += _setup_findings(scenario, null, reference)
        findings += _check_error_findings(scenario, null, reference)
        findings += _vacuity_findings(scenario, null)
        if solution is not None:
            findings += _solution_findings(scenario, solution, reference)
        if name in solutions.missing:
            findings.append(
                warning(
                    "selftest-no-solution",
                    f'scenario "{name}" has no reference solution: only the null agent ran',
                    source=scenario.source,
                    next=f"add {solutions.missing[name]}/files/ to prove its checks can pass",
                )
            )
        scenarios[name] = ScenarioSelftest(
            ok=not any(d.severity == "error" for d in findings),
            checks=len(scenario.document.checks),
            solution=solution.label if solution is not None else None,
            null_agent=_outcome(null),
            reference_agent=_outcome(reference),
            findings=[d.code for d in findings],
        )
        everything += findings
    return scenarios, everything + solutions.warnings


def _plan(suite: Suite, solutions: Mapping[str, Solution]) -> Plan:
    config = resolve_budget(suite.project.eval.budget, trials=1)
    ordered = tuple(sorted(suite.scenarios, key=lambda s: s.name))
    trials: list[PlannedTrial] = []
    for scenario in ordered:
        budget = scenario.document.budget
        timeout_ms = budget.timeout_ms if budget is not None else config.timeout_ms
        indexes = [NULL_TRIAL] + ([REFERENCE_TRIAL] if scenario.name in solutions else [])
        for index in indexes:
            trials.append(PlannedTrial(len(trials), scenario, index, timeout_ms))
    config = config.model_copy(
        update={"trials": 2 if solutions else 1, "max_sessions": max(1, len(trials))}
    )
    return Plan(trials=tuple(trials), config=config, scenarios=ordered)


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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

    Returns:
        The analysis, the report and their paths; ``exit_code`` is 0 when the suite
        is sound and 1 when a scenario is vacuous, its solution fails or is invalid,
        its setup fails or a check reaches no verdict.

    Raises:
        DiagnosticError: validation failed (exit 2) or the report could not be
            written (exit 3).
    """
    job_count, solutions_dir = _check_options(jobs, solutions)
    suite = load_suite(path, scenario_filter=list(scenarios))
    assert suite.native is not None
    found = _find_solutions(suite, solutions_dir)
    plan = _plan(suite, found.found)
    base = Path(out) if out is not None else suite.project.root / ".atlante" / "eval"
    try:
        run_id, run_dir = reserve_run_dir(base, new_run_id())
        if out is None:
            ensure_gitignore(suite.project.root / ".atlante")
    except PublishError as exc:
        raise publish_error(base, exc) from None
    host = SelftestHost(found.found)
    meta = Meta(
        atlante=__version__,
        host=host.name,
        model="none",
        model_version="none",
        config=plan.config,
        host_version=host.version,
        started_at=_utc_now(),
        jobs=job_count,
        manifest_digest=suite.native.digest,
    )
    started = time.monotonic()
    results: dict[int, TrialResult] = {}

    async def record(planned: PlannedTrial, result: TrialResult) -> None:
        results[planned.position] = result
        agent: AgentName = "null" if planned.index == NULL_TRIAL else "reference"
        await _notify(on_trial, planned.scenario.name, agent, result)

    async def ignore(_event: ProgressEvent) -> None:
        return None

    run_root = create_run_root()
    engine = Engine(
        plan=plan,
        host=host,
        native=suite.native,
        run_root=run_root,
        options=EngineOptions(jobs=job_count, keep=keep),
        emit=ignore,
        on_trial=record,
    )
    try:
        await engine.run()
    finally:
        if not keep:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_tree, run_root)
    by_name: dict[str, list[TrialResult]] = {}
    for planned in plan.trials:
        by_name.setdefault(planned.scenario.name, []).append(results[planned.position])
    report = finalize(
        RunReport(
            run_id=run_id,
            meta=meta.model_copy(
                update={
                    "ended_at": _utc_now(),
                    "wall_time_ms": int((time.monotonic() - started) * 1000),
                    "run_root": str(run_root) if keep else None,
                }
            ),
            scenarios={s.name: scenario_result(s, by_name[s.name]) for s in plan.scenarios},
        )
    )
    judged, diagnostics = _analyse(plan, results, found)
    failed = any(d.severity == "error" for d in diagnostics)
    report_path = run_dir / "report.json"
    result = SelftestResult(
        ok=not failed,
        exit_code=1 if failed else 0,
        run_id=run_id,
        report=str(report_path),
        scenarios=judged,
        diagnostics=[*suite.warnings, *diagnostics],
    )
    result_path = run_dir / "selftest.json"
    try:
        atomic_write(report_path, report.to_json().encode("utf-8"))
        atomic_write(result_path, result.to_json().encode("utf-8"))
    except PublishError as exc:
        raise publish_error(run_dir, exc) from None
    return SelftestOutcome(
        result=result, report=report, report_path=report_path, result_path=result_path
    )
