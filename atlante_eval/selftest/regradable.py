"""Prove each scenario regrades exactly: its proving trial, rebuilt, gets the same verdicts.

``regrade`` applies changed checks to stored trials; it is only worth trusting
when the checks depend on the sandbox's files alone. After the selftest trials,
each scenario's proving trial (the reference agent's, else the null agent's) is
rebuilt from its stored final state and graded again by the same checks
(:class:`~atlante_eval.run.regrader.TrialRegrader`, the path ``regrade`` takes). A
check whose verdict moves depends on something else (the clock, the network,
randomness, files outside the sandbox): ``selftest-regrade-differs``, an error.
A trial that cannot be rebuilt (its state over the cap, a FIFO it left) is a
``selftest-not-regradable`` warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..diagnostics import Diagnostic, error, warning
from ..isolation.limits import LimitSettings, run_limit_groups
from ..isolation.trial import IsolationSettings
from ..project import NativeOutputs, Plan, Scenario
from ..report import TrialResult
from ..report.blobstore import BlobStore
from ..report.final_state import ManifestError
from ..report.regrade_delta import CheckChange, check_changes
from ..report.state_files import read_final_state
from ..run.lifecycle import ActiveRun
from ..run.regrader import TrialRegrader
from ..trial.rebuild import RebuildError
from .findings import NULL_TRIAL, REFERENCE_TRIAL, Role, ScenarioSelftest

__all__ = ["merge_findings", "regrade_proving_trials"]


Trials = Mapping[tuple[str, int], TrialResult]


def _proving(
    scenario: Scenario, results: Trials, roles: Mapping[tuple[str, int], Role]
) -> TrialResult | None:
    """The trial that proves the scenario: the reference agent's, else the null agent's."""
    for index in (REFERENCE_TRIAL, NULL_TRIAL):
        role = roles.get((scenario.name, index))
        trial = results.get((scenario.name, index))
        if role is not None and role.agent in ("reference", "null") and trial is not None:
            return trial if trial.checks is not None else None
    return None


def _moved(changes: Sequence[CheckChange]) -> str:
    return "; ".join(f"check {c.index} ({c.type}) {c.before} -> {c.after}" for c in changes)


async def _one(
    scenario: Scenario, trial: TrialResult, regrader: TrialRegrader
) -> Diagnostic | None:
    """Regrade one proving trial; a finding when it does not reproduce its verdicts."""
    ref = trial.final_state
    reason: str | None = None
    if ref is None or not ref.complete:
        reason = "its final state was not stored whole" + (
            f" ({ref.reason})" if ref is not None and ref.reason else ""
        )
    else:
        try:
            state = read_final_state(regrader.files, ref)
            regraded = await regrader.grade(scenario, trial.i, state, tampered=trial.tampered)
        except (ManifestError, RebuildError) as exc:
            reason = str(exc)
        else:
            moved = check_changes(trial.checks, regraded.graded.checks)
            if not moved:
                return None
            return error(
                "selftest-regrade-differs",
                f'scenario "{scenario.name}": graded again on the same stored files, its trial '
                f"{trial.i} got other verdicts ({_moved(moved)}); `regrade` cannot be trusted "
                "for it",
                source=scenario.source,
                next="make those checks depend on the sandbox's files alone (no clock, "
                "network, randomness or files outside the sandbox)",
            )
    return warning(
        "selftest-not-regradable",
        f'scenario "{scenario.name}": its trial {trial.i} cannot be regraded: {reason}',
        source=scenario.source,
        next="keep what setup and the solution produce under the final-state cap, "
        "and leave no FIFO or device in the sandbox",
    )


async def regrade_proving_trials(
    plan: Plan,
    results: Mapping[int, TrialResult],
    roles: Mapping[tuple[str, int], Role],
    *,
    run: ActiveRun,
    native: NativeOutputs,
    isolation: IsolationSettings | None,
    limits: LimitSettings | None,
) -> dict[str, Diagnostic]:
    """Regrade each scenario's proving trial from the run's store; findings by scenario name.

    The rebuilt trials' command checks run under the run's isolation and join its
    limit group, as the selftest's own trials did.
    """
    store = BlobStore.open(run.files, create=False)
    if store is None:
        return {}
    with store:
        regrader = TrialRegrader(
            run_root=run.run_root,
            native=native,
            store=store,
            files=run.files,
            isolation=isolation,
            limits=limits,
        )
        async with run_limit_groups(limits):
            return await _regrade_each(plan, results, roles, regrader)


async def _regrade_each(
    plan: Plan,
    results: Mapping[int, TrialResult],
    roles: Mapping[tuple[str, int], Role],
    regrader: TrialRegrader,
) -> dict[str, Diagnostic]:
    """Regrade each scenario's proving trial; the findings, by scenario name."""
    by_trial = {
        (t.scenario.name, t.index): results[t.position]
        for t in plan.trials
        if t.position in results
    }
    found: dict[str, Diagnostic] = {}
    for scenario in plan.scenarios:
        trial = _proving(scenario, by_trial, roles)
        if trial is None:
            continue
        finding = await _one(scenario, trial, regrader)
        if finding is not None:
            found[scenario.name] = finding
    return found


def merge_findings(
    judged: Mapping[str, ScenarioSelftest],
    diagnostics: Sequence[Diagnostic],
    extra: Mapping[str, Diagnostic],
) -> tuple[dict[str, ScenarioSelftest], list[Diagnostic]]:
    """Add the regrade findings to the scenarios' judgements and to the diagnostics."""
    merged = dict(judged)
    for name, finding in extra.items():
        current = merged.get(name)
        if current is None:
            continue
        merged[name] = current.model_copy(
            update={
                "findings": [*current.findings, finding.code],
                "ok": current.ok and finding.severity != "error",
            }
        )
    return merged, [*diagnostics, *extra.values()]
