"""Which plan positions a ``--shard I/N`` run owns, and the record of a balanced split.

Round robin (the default) needs nothing but the plan. ``--balance duration`` reads
the report named by ``--balance-from``, estimates every trial's session duration
as its scenario's mean there, and splits the plan longest-processing-time first
(:func:`atlante_eval.project.shards.balance_by_duration`). Each shard computes the
same split from the same plan and report, so the shards still cover every plan
position exactly once and ``merge`` needs nothing new; the report's
``meta.shardBalance`` records the split, the expected makespan of every shard, and
the shard's own wall time once it has run.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._util.paths import display_path
from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from ..history import HistoryLocation
from ..project import Plan
from ..project.shards import balance_by_duration, expected_makespan, round_robin
from ..report import RunReport, ShardBalance, ShardLoad, TrialResult
from .options import RunOptions

__all__ = ["ShardSplit", "scenario_durations", "shard_split"]

#: Verdicts whose duration says nothing about the session: no session ran, or only the
#: sandbox's assembly was timed.
_UNTIMED = frozenset({"skipped-budget", "infra-error"})


@dataclass(frozen=True, slots=True)
class ShardSplit:
    """This shard's plan positions, and the balanced split's record (``None``: round robin)."""

    positions: tuple[int, ...]
    """Plan positions this shard runs, in plan order."""
    record: ShardBalance | None = None
    """``meta.shardBalance`` before the run (no ``actualMs`` yet)."""
    index: int = 1
    """This shard's 1-based index."""
    notices: tuple[Diagnostic, ...] = ()
    """Warnings about the estimates (``shard-balance-estimated``)."""

    def decorate(self, report: RunReport) -> RunReport:
        """Add this shard's wall time to the published report's record as its ``actualMs``."""
        record, wall = self.record, report.meta.wall_time_ms
        if record is None or wall is None:
            return report
        shards = [
            load.model_copy(update={"actual_ms": wall}) if n == self.index - 1 else load
            for n, load in enumerate(record.shards)
        ]
        balance = record.model_copy(update={"shards": shards})
        return report.model_copy(
            update={"meta": report.meta.model_copy(update={"shard_balance": balance})}
        )


def scenario_durations(report: RunReport) -> dict[str, int]:
    """Mean session duration (ms, at least 1) of each scenario's timed trials in ``report``."""
    found: dict[str, int] = {}
    for name, result in report.scenarios.items():
        timed = [t.duration_ms for t in result.trials if _timed(t)]
        if timed:
            found[name] = max(1, round(statistics.fmean(timed)))
    return found


def _timed(trial: TrialResult) -> bool:
    return trial.verdict not in _UNTIMED


def history_source(history: HistoryLocation | None) -> tuple[RunReport, str]:
    """The history store's newest whole run (no shard of one, not interrupted, no arm).

    Shards of the run under way record themselves as shards, so every shard of it
    finds the same run, whichever starts first.

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) when there is no store or no such run.
    """
    found = None
    if history is not None:
        from ..history.store import open_store

        with open_store(history) as store:
            whole = [r for r in store.runs() if not r.shard and not r.interrupted and not r.arm]
            if whole:
                found = store.report(whole[0].run_id), f"history {history.display}"
    if found is None:
        where = f"the history store {history.display}" if history is not None else "no store"
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    "--balance duration without --balance-from reads the durations of the "
                    f"history store's last whole run, and {where} holds none",
                    next="add --balance-from PATH (a report.json or its run directory), the "
                    "same file on every shard; or record a run first",
                )
            ]
        )
    return found


def shard_split(
    plan: Plan, options: RunOptions, history: HistoryLocation | None = None
) -> ShardSplit | None:
    """The positions ``options.shard`` owns (``None`` without ``--shard``).

    ``--balance duration`` reads ``--balance-from``, else the newest whole run in
    ``history`` (:func:`history_source`).

    Raises:
        DiagnosticError: ``report-unreadable`` (exit 2) when ``--balance-from`` cannot
            be read; ``invalid-option`` when neither it nor the history has durations.
    """
    shard = options.shard
    if shard is None:
        return None
    if options.balance == "round-robin":
        owned = round_robin(len(plan.trials), shard.count)[shard.index - 1]
        return ShardSplit(positions=owned, index=shard.index)
    if options.balance_from is not None:
        from ..report.loading import load_report  # --balance duration only

        source = load_report(options.balance_from)
        shown = display_path(options.balance_from)
    else:
        source, shown = history_source(history)
    durations = scenario_durations(source)
    estimates, estimated = _estimates(plan, durations)
    split = balance_by_duration(estimates, shard.count)
    jobs = options.jobs
    loads = [
        ShardLoad(
            shard=f"{n + 1}/{shard.count}",
            trials=len(positions),
            expected_ms=expected_makespan(estimates, positions, jobs),
        )
        for n, positions in enumerate(split)
    ]
    rr = round_robin(len(plan.trials), shard.count)
    record = ShardBalance(
        by="duration",
        from_run_id=source.run_id,
        jobs=jobs,
        expected_makespan_ms=max((load.expected_ms for load in loads), default=0),
        round_robin_makespan_ms=max(
            (expected_makespan(estimates, positions, jobs) for positions in rr), default=0
        ),
        estimated=estimated or None,
        shards=loads,
    )
    notes = _notes(estimated, plan, durations, shown)
    return ShardSplit(
        positions=split[shard.index - 1], record=record, index=shard.index, notices=notes
    )


def _estimates(plan: Plan, durations: Mapping[str, int]) -> tuple[list[int], list[str]]:
    """Each plan position's expected duration, and the scenarios that had to be guessed.

    A scenario the report does not time is expected to take the mean of those it does
    (1 ms when it times none, which makes the split round robin).
    """
    known = [durations[s.name] for s in plan.scenarios if s.name in durations]
    fallback = max(1, round(statistics.fmean(known))) if known else 1
    estimated = [s.name for s in plan.scenarios if s.name not in durations]
    return [durations.get(t.scenario.name, fallback) for t in plan.trials], estimated


def _notes(
    estimated: Sequence[str], plan: Plan, durations: Mapping[str, int], source: str
) -> tuple[Diagnostic, ...]:
    """``shard-balance-estimated`` when some (or all) scenarios have no duration in the report."""
    if not estimated:
        return ()
    if len(estimated) == len(plan.scenarios):
        message = (
            f"--balance-from {source} times none of the plan's scenarios "
            f"({len(durations)} timed there): the shards are split round robin"
        )
    else:
        shown = ", ".join(estimated[:5]) + (
            f" and {len(estimated) - 5} more" if len(estimated) > 5 else ""
        )
        message = (
            f"{len(estimated)} of {len(plan.scenarios)} scenarios have no timed trial in "
            f"--balance-from {source} ({shown}): each is expected to take the mean of the others"
        )
    return (
        warning(
            "shard-balance-estimated",
            message,
            source=source,
            next="balance from a recent report of the same suite (every shard the same file)",
        ),
    )
