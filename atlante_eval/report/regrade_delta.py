"""Which trials a regrade changed, and why: the checks whose verdicts moved.

Two reports of the same trials (one ``regrade`` of the other, see
``meta.regradedFrom``) are compared trial by trial: each trial whose verdict
differs is listed with the checks that account for it (by position in the
scenario document: a verdict that moved, a check that is new or gone), or the
reason a trial could not be regraded. ``compare`` shows it for such a pair,
and ``regrade`` prints it after publishing.
"""

from __future__ import annotations

from .models import CheckResult, CheckVerdict, OutputModel, RunReport, TrialResult, Verdict

__all__ = ["CheckChange", "RegradeDelta", "TrialChange", "check_changes", "regrade_delta"]


class CheckChange(OutputModel):
    """One check whose verdict differs between the two reports."""

    index: int
    """The check's position in the scenario document."""
    type: str
    """Its type (HEAD's when both have it)."""
    before: CheckVerdict | None
    """BASE's verdict (null: the check is new in HEAD)."""
    after: CheckVerdict | None
    """HEAD's verdict (null: the check is gone from HEAD)."""


class TrialChange(OutputModel):
    """A trial whose verdict differs between the two reports."""

    scenario: str
    """Scenario name (``scenario@arm`` for an arm's trial in a run with arms)."""
    i: int
    """Trial index."""
    before: Verdict
    """BASE's verdict."""
    after: Verdict
    """HEAD's verdict."""
    checks: list[CheckChange]
    """The checks whose verdicts moved (why the trial's verdict did)."""
    reason: str | None = None
    """Why the trial could not be regraded, when that is the change."""


class RegradeDelta(OutputModel):
    """Trial-level changes between a run and its regrade (``compare --json``: ``regrade``)."""

    regraded_run: str
    """The run id of the regraded report."""
    from_run: str
    """The run id it was regraded from."""
    trials: int
    """Trials in both reports."""
    regraded: int
    """Trials whose checks ran again."""
    kept: int
    """Trials that never reached grading (their verdict stands)."""
    unavailable: int
    """Graded trials that could not be rebuilt (``infra-error`` in the regrade)."""
    changed: list[TrialChange]
    """Trials whose verdict differs, scenario by scenario, in index order."""


def check_changes(
    before: list[CheckResult] | None, after: list[CheckResult] | None
) -> list[CheckChange]:
    """The checks whose verdict differs between two runs of one trial, by position."""
    old = {c.index: c for c in before or []}
    new = {c.index: c for c in after or []}
    changes = []
    for index in sorted(old.keys() | new.keys()):
        was, now = old.get(index), new.get(index)
        if was is not None and now is not None and was.verdict == now.verdict:
            continue
        shown = now if now is not None else was
        assert shown is not None
        changes.append(
            CheckChange(
                index=index,
                type=shown.type,
                before=was.verdict if was is not None else None,
                after=now.verdict if now is not None else None,
            )
        )
    return changes


def _change(scenario: str, old: TrialResult, new: TrialResult) -> TrialChange:
    status = new.regrade or old.regrade
    reason = status.reason if status is not None else None
    return TrialChange(
        scenario=scenario,
        i=new.i,
        before=old.verdict,
        after=new.verdict,
        checks=check_changes(old.checks, new.checks),
        reason=reason,
    )


def _by_key(report: RunReport) -> dict[str, list[TrialResult]]:
    """Every scenario's trials, and each arm's as ``scenario@arm`` (a run with arms)."""
    found: dict[str, list[TrialResult]] = {}
    for name, result in report.scenarios.items():
        found[name] = result.trials
        for arm, trials in (result.arms or {}).items():
            found[f"{name}@{arm}"] = trials.trials
    return found


def regrade_delta(base: RunReport, head: RunReport) -> RegradeDelta | None:
    """The trials whose verdict differs, when one report regraded the other (else ``None``)."""
    if head.meta.regraded_from == base.run_id:
        regraded = head
    elif base.meta.regraded_from == head.run_id:
        regraded = base
    else:
        return None
    before, after = _by_key(base), _by_key(head)
    pairs = [
        (name, old, new)
        for name in sorted(before.keys() & after.keys())
        for old in before[name]
        for new in after[name]
        if old.i == new.i
    ]
    statuses = [(new if regraded is head else old).regrade for _name, old, new in pairs]
    return RegradeDelta(
        regraded_run=regraded.run_id,
        from_run=regraded.meta.regraded_from or "",
        trials=len(pairs),
        regraded=sum(1 for s in statuses if s is not None and s.status == "regraded"),
        kept=sum(1 for s in statuses if s is not None and s.status == "kept"),
        unavailable=sum(1 for s in statuses if s is not None and s.status == "unavailable"),
        changed=[_change(name, old, new) for name, old, new in pairs if old.verdict != new.verdict],
    )
