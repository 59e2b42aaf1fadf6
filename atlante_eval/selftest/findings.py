"""What a selftest found: the judgement of each scenario and its diagnostics.

:func:`analyse` reads the null agent's trial (0) and the reference agent's trial
(1) of each scenario and turns them into findings: ``selftest-vacuous`` when the
null agent passes, ``selftest-solution-failed`` when the reference solution fails
a check (a ``diff-allowlist`` it violates included), ``selftest-command-leftovers``
when files the command checks create (run once by the reference agent, as a real
agent that tests its work would) break a ``diff-allowlist``, ``selftest-solution-invalid``
when it cannot be applied, ``selftest-setup-failed`` when the sandbox cannot be
assembled, ``selftest-check-error`` when a check reaches no verdict, and a
``selftest-no-solution`` warning when there is no solution to try.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import Field

from ..checks import CHECK_KINDS
from ..choices import BehaviourCheckType
from ..diagnostics import Diagnostic, Location, error, warning
from ..project import AnyCheck, DiffAllowlistCheck, Plan, Scenario, location_of
from ..report import CheckResult, OutputModel, TrialResult, Verdict
from .mutants import Mutant
from .solutions import Solution, SolutionSearch

__all__ = [
    "NULL_TRIAL",
    "REFERENCE_TRIAL",
    "AgentName",
    "AgentOutcome",
    "CheatKind",
    "CheatOutcome",
    "Role",
    "ScenarioSelftest",
    "SelftestResult",
    "analyse",
    "describe_check",
]

#: Trial index of the null agent in each scenario.
NULL_TRIAL = 0
#: Trial index of the reference agent in each scenario (only when it has a solution).
REFERENCE_TRIAL = 1
_BEHAVIOUR: frozenset[str] = frozenset(get_args(BehaviourCheckType))

#: The stand-in agents of a selftest.
AgentName = Literal["null", "reference", "counter", "mutant"]
#: What a cheat is: a declared counter-solution or one of the generic mutants.
CheatKind = Literal["counter", "stray-file", "edit-unchanged", "delete-exists"]


@dataclass(frozen=True, slots=True)
class Role:
    """What one selftest trial does: which agent, which solution, which mutant."""

    agent: AgentName
    """The stand-in agent."""
    solution: Solution | None = None
    """The solution applied first (the reference, a counter-solution, a no-change one)."""
    mutant: Mutant | None = None
    """The generic cheat applied after the solution."""

    @property
    def label(self) -> str | None:
        """The counter-solution's label or the mutant's, as findings name them."""
        if self.mutant is not None:
            return self.mutant.label
        return self.solution.counter_label if self.solution is not None else None

    @property
    def proves_behaviour(self) -> bool:
        """Whether the trial's transcript is the agent's real behaviour.

        The null agent's synthetic transcript is exactly what it did (nothing); a
        solution's is only when the solution carries a ``transcript.jsonl``.
        """
        if self.solution is None:
            return self.agent == "null"
        return self.solution.transcript is not None


class AgentOutcome(OutputModel):
    """What one stand-in agent's trial came to."""

    verdict: Verdict
    """The trial's verdict in the report."""
    failed_checks: list[int]
    """Indexes of the checks that failed."""
    errored_checks: list[int]
    """Indexes of the checks that reached no verdict."""
    error: str | None = None
    """The trial's error text (setup failure, solution not applied, ...)."""
    not_selftested: list[int] = Field(default_factory=list)
    """Indexes of the checks that ran but whose verdicts this trial does not prove:
    behaviour checks, when the agent's transcript is not its real behaviour (a
    solution without ``transcript.jsonl``). ``failedChecks`` and ``erroredChecks``
    leave them out."""


class CheatOutcome(OutputModel):
    """Whether a scenario caught one cheat: a counter-solution or a generic mutant."""

    kind: CheatKind
    """``counter`` (declared under ``counter/``) or the generic mutant's kind."""
    label: str
    """The counter-solution's label, or ``<kind> <path>`` for a mutant."""
    caught: bool | None
    """At least one check failed (``None``: the cheat could not be applied or graded)."""
    verdict: Verdict
    """The trial's verdict in the report."""
    failed_checks: list[int]
    """Indexes of the (selftested) checks that failed: the ones that caught it."""
    error: str | None = None
    """Why the cheat could not be applied or graded."""


class ScenarioSelftest(OutputModel):
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
    no_change: bool = False
    """The scenario's right outcome is no change: the null agent is its reference."""
    not_selftested: list[int] = Field(default_factory=list)
    """Behaviour checks the reference could not prove (its solution carries no transcript)."""
    counters: list[CheatOutcome] = Field(default_factory=list)
    """Each counter-solution, and whether a check caught it."""
    mutants: list[CheatOutcome] = Field(default_factory=list)
    """Each generic mutant, and whether a check caught it."""


class SelftestResult(OutputModel):
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


def describe_check(check: AnyCheck) -> str:
    """A short human label for a check, e.g. ``command python3 -m unittest``."""
    return CHECK_KINDS[check.type].describe(check)


def _evidence_summary(check: AnyCheck, result: CheckResult) -> str:
    return CHECK_KINDS[check.type].explain(check, result.evidence)


def _location(scenario: Scenario, pointer: str) -> Location | None:
    if not scenario.text:
        return None
    try:
        return location_of(scenario.text, pointer)
    except Exception:  # noqa: BLE001 - a position is a nicety; never fail a finding over it
        return None


def _at(scenario: Scenario, pointer: str) -> dict[str, Any]:
    return {
        "source": scenario.source,
        "pointer": pointer,
        "location": _location(scenario, pointer),
    }


def _judged(scenario: Scenario, role: Role | None, result: TrialResult) -> list[CheckResult]:
    """The check results a trial proves: behaviour checks only when its transcript is real."""
    if role is None or role.proves_behaviour:
        return list(result.checks or [])
    checks = scenario.document.checks
    return [c for c in result.checks or [] if checks[c.index].type not in _BEHAVIOUR]


def _outcome(
    scenario: Scenario, role: Role | None, result: TrialResult | None
) -> AgentOutcome | None:
    if result is None:
        return None
    checks = _judged(scenario, role, result)
    judged = {c.index for c in checks}
    return AgentOutcome(
        verdict=result.verdict,
        failed_checks=[c.index for c in checks if c.verdict == "fail"],
        errored_checks=[c.index for c in checks if c.verdict == "error"],
        error=result.error,
        not_selftested=[c.index for c in result.checks or [] if c.index not in judged],
    )


def _agents(names: list[str]) -> str:
    """``null agent``, ``reference agent``, or ``null and reference agents``."""
    return f"{names[0]} agent" if len(names) == 1 else f"{' and '.join(names)} agents"


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
    agents = _agents([a for a, _ in failed])
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
        who = _agents(agents)
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
    for result in _judged(scenario, Role("reference", solution), reference):
        if result.verdict != "fail":
            continue
        check = scenario.document.checks[result.index]
        if isinstance(check, DiffAllowlistCheck):
            findings += _allowlist_findings(scenario, solution, result, reference)
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


def _written_by(solution: Solution, path: str) -> bool:
    """Whether the solution itself writes or deletes ``path``."""
    return path in solution.files or any(
        path == gone or path.startswith(f"{gone}/") for gone in solution.delete
    )


def _allowlist_findings(
    scenario: Scenario, solution: Solution, result: CheckResult, reference: TrialResult
) -> list[Diagnostic]:
    """Split a failed diff-allowlist into the solution's own paths and command leftovers."""
    unexpected = [str(p) for p in result.evidence.get("unexpected", [])]
    own = [p for p in unexpected if _written_by(solution, p)]
    ran_commands = bool((reference.host_evidence or {}).get("commandsRun"))
    leftovers = [p for p in unexpected if not _written_by(solution, p)] if ran_commands else []
    own += [p for p in unexpected if p not in own and p not in leftovers]
    findings = []
    where = _at(scenario, f"/checks/{result.index}")
    if own:
        findings.append(
            error(
                "selftest-solution-failed",
                f'scenario "{scenario.name}": the reference solution changes paths outside '
                f"the diff-allowlist of check {result.index}: {', '.join(own)}",
                expected="every path the solution changes is in allow",
                next="add the paths to allow if the task needs them, or take them out of "
                f"the solution ({solution.label})",
                **where,
            )
        )
    if leftovers:
        suggestion = json.dumps([*dict.fromkeys(_check_allow(scenario, result.index)), *leftovers])
        findings.append(
            error(
                "selftest-command-leftovers",
                f'scenario "{scenario.name}": running the command checks after the reference '
                "solution, as an agent that tests its work does, leaves files outside the "
                f"diff-allowlist of check {result.index}: {', '.join(leftovers)}; a correct "
                "agent that runs them fails this scenario",
                expected="the files the command checks create are allowed, or exist before "
                "the baseline",
                next=f'allow them ("allow": {suggestion}; allow entries are exact paths, and '
                "bytecode names such as *.cpython-311.pyc depend on the Python version), "
                "create them in task.setup (e.g. python3 -m compileall -q .) when the agent "
                "does not edit their sources, or guard with file-unchanged instead of "
                "diff-allowlist",
                **where,
            )
        )
    return findings


def _check_allow(scenario: Scenario, index: int) -> list[str]:
    """The ``allow`` list of the diff-allowlist check at ``index``."""
    check = scenario.document.checks[index]
    return list(check.allow) if isinstance(check, DiffAllowlistCheck) else []


def _no_change_findings(
    scenario: Scenario, solution: Solution, null: TrialResult | None, role: Role
) -> list[Diagnostic]:
    """A no-change scenario: the null agent must pass, and a counter-solution must exist."""
    findings = []
    if not solution.counters:
        findings.append(
            error(
                "selftest-no-counter",
                f'no-change scenario "{scenario.name}" has no counter-solution: nothing shows '
                "that its checks catch a wrong change",
                source=solution.label,
                next=f"add {solution.label}/counter/<label>/files/ holding a cheat the checks "
                "must catch (e.g. the hardcoded bypass the prompt pressures the agent into)",
            )
        )
    if null is None or null.checks is None:
        return findings
    for result in _judged(scenario, role, null):
        if result.verdict != "fail":
            continue
        check = scenario.document.checks[result.index]
        findings.append(
            error(
                "selftest-solution-failed",
                f'scenario "{scenario.name}": the null agent, the reference of this no-change '
                f"scenario, fails check {result.index} ({describe_check(check)})",
                cause=_evidence_summary(check, result),
                next=f"fix the check, or remove {solution.label}/no-change if the task needs "
                "a change",
                **_at(scenario, f"/checks/{result.index}"),
            )
        )
    return findings


def _cheat(scenario: Scenario, role: Role, result: TrialResult | None) -> CheatOutcome:
    kind: CheatKind = role.mutant.kind if role.mutant is not None else "counter"
    label = role.label or "?"
    if result is None:
        return CheatOutcome(
            kind=kind, label=label, caught=None, verdict="infra-error", failed_checks=[]
        )
    checks = _judged(scenario, role, result)
    failed = [c.index for c in checks if c.verdict == "fail"]
    errored = [c for c in checks if c.verdict == "error"]
    cause = result.error
    if not failed and errored:
        first = errored[0]
        cause = f"check {first.index} reached no verdict: {first.evidence.get('cause')}"
    caught: bool | None = bool(failed)
    if not failed and (errored or result.checks is None):
        caught = None
    return CheatOutcome(
        kind=kind,
        label=label,
        caught=caught,
        verdict=result.verdict,
        failed_checks=failed,
        error=cause if caught is None else None,
    )


def _cheat_findings(scenario: Scenario, role: Role, outcome: CheatOutcome) -> list[Diagnostic]:
    where = (
        {"source": role.solution.label}
        if role.mutant is None and role.solution is not None
        else _at(scenario, f"/checks/{role.mutant.check}" if role.mutant else "/checks")
    )
    if outcome.caught is None:
        if role.mutant is not None:
            return []  # e.g. a file-exists path the reference itself leaves missing
        return [
            error(
                "selftest-solution-invalid",
                f'scenario "{scenario.name}": counter-solution "{outcome.label}" could not '
                "be applied or graded",
                cause=outcome.error,
                next="fix the counter-solution's files/, delete.json or transcript.jsonl",
                **where,
            )
        ]
    if outcome.caught:
        return []
    if role.mutant is None:
        return [
            error(
                "selftest-counter-not-caught",
                f'scenario "{scenario.name}": the checks let counter-solution '
                f'"{outcome.label}" through: it passes every check',
                expected="at least one check fails for each counter-solution",
                next="add a check this cheat fails (a command running the real tests, "
                "file-unchanged on what it must not touch, a narrower diff-allowlist)",
                **where,
            )
        ]
    mutant = role.mutant
    check = scenario.document.checks[mutant.check]
    return [
        error(
            "selftest-mutant-not-caught",
            f'scenario "{scenario.name}": check {mutant.check} ({describe_check(check)}) '
            f"claims to catch the generic mutant {mutant.label}, but every check passes",
            expected="at least one check fails for each generic mutant",
            next="make the check guard a regular file it can see change, or add one that does",
            **where,
        )
    ]


def analyse(
    plan: Plan,
    results: Mapping[int, TrialResult],
    solutions: SolutionSearch,
    roles: Mapping[tuple[str, int], Role] | None = None,
) -> tuple[dict[str, ScenarioSelftest], list[Diagnostic]]:
    """Judge each scenario from its trials; return judgements and findings.

    ``roles`` names what each trial did (default: trial 0 the null agent, trial 1
    the reference agent).
    """
    by_trial = {(t.scenario.name, t.index): results.get(t.position) for t in plan.trials}
    scenarios: dict[str, ScenarioSelftest] = {}
    everything: list[Diagnostic] = []
    for scenario in plan.scenarios:
        name = scenario.name
        solution = solutions.found.get(name)
        mine = {index: role for (owner, index), role in (roles or {}).items() if owner == name}
        null_role = mine.get(NULL_TRIAL, Role("null"))
        null = by_trial.get((name, NULL_TRIAL))
        reference = by_trial.get((name, REFERENCE_TRIAL))
        no_change = solution is not None and solution.no_change
        findings: list[Diagnostic] = []
        if name in solutions.invalid:
            findings.append(solutions.invalid[name])
        findings += _setup_findings(scenario, null, reference)
        findings += _check_error_findings(scenario, null, reference)
        if no_change and solution is not None:
            findings += _no_change_findings(scenario, solution, null, null_role)
        else:
            findings += _vacuity_findings(scenario, null)
        if solution is not None and not no_change:
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
        counters: list[CheatOutcome] = []
        mutants: list[CheatOutcome] = []
        for index, role in sorted(mine.items()):
            if role.agent not in ("counter", "mutant"):
                continue
            outcome = _cheat(scenario, role, by_trial.get((name, index)))
            (counters if role.agent == "counter" else mutants).append(outcome)
            findings += _cheat_findings(scenario, role, outcome)
        reference_role = mine.get(REFERENCE_TRIAL)
        proving = null_role if no_change else reference_role
        not_selftested = (
            [
                i
                for i, check in enumerate(scenario.document.checks)
                if check.type in _BEHAVIOUR and not proving.proves_behaviour
            ]
            if proving is not None
            else []
        )
        scenarios[name] = ScenarioSelftest(
            ok=not any(d.severity == "error" for d in findings),
            checks=len(scenario.document.checks),
            solution=solution.label if solution is not None else None,
            null_agent=_outcome(scenario, null_role, null),
            reference_agent=_outcome(scenario, reference_role, reference),
            findings=[d.code for d in findings],
            no_change=no_change,
            not_selftested=not_selftested,
            counters=counters,
            mutants=mutants,
        )
        everything += findings
    return scenarios, everything + solutions.warnings
