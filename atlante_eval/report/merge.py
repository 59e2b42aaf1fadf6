"""Merge the shard reports of one plan (``run --shard I/N``) into the whole run's report.

Each shard report holds, per scenario, only the trials of its slice of the plan. The
merged report is what one machine running the whole plan would have written, timings
aside: per scenario the union of the trials in index order with every statistic
recomputed, run totals recomputed, and ``meta.shard`` removed. The meta of a merged
report: ``startedAt`` the earliest shard's, ``endedAt`` the latest's, ``wallTimeMs``
the longest shard's (the shards ran side by side), ``jobs`` the sum over shards, and
``interrupted`` set when any shard was. Shards balanced by duration keep their common
``shardBalance`` record, with every shard's wall time as its ``actualMs``. Merging is
strict: every shard 1..N exactly once, one plan digest, one split, no trial twice, no
trial missing; anything else is refused with ``merge-mismatch`` (exit 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from .._util.paths import display_path
from ..diagnostics import DiagnosticError, error
from .arms import arm_names, arm_view
from .loading import load_report, report_path
from .models import (
    REPORT_FILE,
    HostSource,
    Meta,
    RunReport,
    ScenarioResult,
    ShardBalance,
    TrialResult,
)
from .publish import PublishError, atomic_write, new_run_id, report_failed, reserve_report_dir
from .results import finalize, summarize
from .usage import GatewaySummary

__all__ = [
    "ShardReport",
    "load_shards",
    "merge_reports",
    "parse_shard_label",
    "publish_merged",
]


@dataclass(frozen=True, slots=True)
class ShardReport:
    """A loaded shard report and where it came from."""

    source: str
    """The file it was read from (for messages)."""
    report: RunReport
    """The report."""


def load_shards(paths: Sequence[Path | str]) -> list[ShardReport]:
    """Read each shard report (a ``report.json`` or its run directory), named as shown.

    Raises:
        DiagnosticError: ``report-unreadable`` (exit 2).
    """
    return [ShardReport(display_path(report_path(path)), load_report(path)) for path in paths]


def publish_merged(
    merged: RunReport, *, out: Path | None = None, output: Path | None = None
) -> tuple[RunReport, Path]:
    """Publish a merged report; return it as published (its run id may change) and where.

    With ``out``, as ``out/<runId>/report.json`` like ``run --out`` (the run id is
    re-rolled on collision); with ``output``, to that file, never overwritten.

    Raises:
        ValueError: both or neither of ``out`` and ``output``.
        DiagnosticError: ``eval-report-failed`` (exit 3) when it cannot be written.
    """
    if (out is None) == (output is None):
        raise ValueError("publish_merged takes one of out and output")
    if out is not None:
        report_dir = reserve_report_dir(out, merged.run_id)
        merged = merged.model_copy(update={"run_id": report_dir.run_id})
        return merged, report_dir.publish(REPORT_FILE, merged.to_json().encode("utf-8"))
    assert output is not None
    try:
        atomic_write(output, merged.to_json().encode("utf-8"), replace=False)
    except PublishError as exc:
        raise report_failed(output, exc, action="write the merged report") from None
    return merged, output


def parse_shard_label(label: str) -> tuple[int, int] | None:
    """Parse ``I/N`` (1 <= I <= N) into ``(I, N)``; None when it is not one."""
    parts = label.split("/")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    index, count = int(parts[0]), int(parts[1])
    return (index, count) if 1 <= index <= count else None


def merge_reports(shards: Sequence[ShardReport], *, run_id: str | None = None) -> RunReport:
    """Merge the shard reports of one plan into one report.

    Args:
        shards: Every shard of the plan, in any order.
        run_id: Run id of the merged report (default: a fresh one).

    Raises:
        DiagnosticError: ``merge-mismatch`` (exit 2) naming what does not fit.
    """
    if not shards:
        raise _mismatch("no reports to merge", next_step="pass every shard report of the run")
    ordered = _check_shards(shards)
    first = ordered[0].report
    _check_same_run(ordered)
    _check_same_split(ordered)
    arms = arm_names(first)
    if arms:
        scenarios = _merge_arms(ordered, arms, trials=first.meta.config.trials)
    else:
        scenarios = _merge_scenarios(ordered, trials=first.meta.config.trials)
    merged = RunReport(
        run_id=run_id or new_run_id(),
        meta=_merge_meta([s.report.meta for s in ordered]),
        scenarios=scenarios,
    )
    if not arms:
        return finalize(merged)
    from .uplift import with_uplift  # comparison: only for a run with arms

    return with_uplift(finalize(merged))


def _merge_arms(
    shards: list[ShardReport], arms: list[str], *, trials: int
) -> dict[str, ScenarioResult]:
    """Merge a run with arms arm by arm: each arm's trials must be complete on their own."""
    per_arm = {
        arm: _merge_scenarios(
            [replace(s, report=arm_view(s.report, arm)) for s in shards], trials=trials
        )
        for arm in arms
    }
    control, others = per_arm[arms[0]], arms[1:]
    return {
        name: result.model_copy(
            update={"arms": {a: per_arm[a][name] for a in others if name in per_arm[a]} or None}
        )
        for name, result in control.items()
    }


def _check_shards(shards: Sequence[ShardReport]) -> list[ShardReport]:
    """Every report is a shard of the same N; indexes 1..N once each. Returns them by I."""
    labelled: list[tuple[int, int, ShardReport]] = []
    for shard in shards:
        label = shard.report.meta.shard
        parsed = parse_shard_label(label) if label else None
        if parsed is None:
            raise _mismatch(
                f"{shard.source} is not a shard report (meta.shard is "
                f"{'missing' if not label else repr(label)})",
                source=shard.source,
                next_step="merge only the reports written by `atlante-eval run --shard I/N`",
            )
        labelled.append((*parsed, shard))
    counts = sorted({count for _, count, _ in labelled})
    if len(counts) > 1:
        raise _mismatch(
            "the reports split the plan into different numbers of shards: "
            + ", ".join(f"{s.source} is {i}/{n}" for i, n, s in labelled),
            next_step="merge the shards of one run, all written with the same N",
        )
    count = counts[0]
    seen: dict[int, str] = {}
    for index, _, shard in labelled:
        if index in seen:
            raise _mismatch(
                f"shard {index}/{count} was given twice: {seen[index]} and {shard.source}",
                source=shard.source,
                next_step="pass each shard report once",
            )
        seen[index] = shard.source
    missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in seen]
    if missing:
        raise _mismatch(
            f"missing shard report{'s' if len(missing) > 1 else ''}: {', '.join(missing)}",
            next_step=f"pass all {count} shard reports of the run",
        )
    return [shard for _, _, shard in sorted(labelled, key=lambda item: item[0])]


def _check_same_run(shards: list[ShardReport]) -> None:
    """One plan digest, and the same engine, host and budget in every shard."""
    first = shards[0]
    if first.report.meta.plan_digest is None:
        raise _mismatch(
            f"{first.source} has no meta.planDigest, so its plan cannot be checked",
            source=first.source,
            next_step="merge reports written by `atlante-eval run --shard I/N`",
        )
    for shard in shards[1:]:
        # What the plan digest covers comes first: the message names what differs.
        for what, value, expected in (
            ("engine version", shard.report.meta.atlante, first.report.meta.atlante),
            ("host", shard.report.meta.host, first.report.meta.host),
            ("host version", shard.report.meta.host_version, first.report.meta.host_version),
            ("host source", _host_of(shard.report.meta), _host_of(first.report.meta)),
            ("budget", shard.report.meta.config, first.report.meta.config),
            ("plan digest", shard.report.meta.plan_digest, first.report.meta.plan_digest),
        ):
            if value != expected:
                raise _mismatch(
                    f"{shard.source} belongs to another run: its {what} differs from "
                    f"{first.source}'s",
                    source=shard.source,
                    expected=str(expected),
                    next_step="merge only the shards of one run (same plan, host and engine)",
                )


def _merge_scenarios(shards: list[ShardReport], *, trials: int) -> dict[str, ScenarioResult]:
    collected: dict[str, dict[int, tuple[TrialResult, str]]] = {}
    described: dict[str, tuple[ScenarioResult, str]] = {}
    for shard in shards:
        for name, result in shard.report.scenarios.items():
            _check_description(name, result, shard.source, described)
            into = collected.setdefault(name, {})
            for trial in result.trials:
                if trial.i in into:
                    raise _mismatch(
                        f"trial {trial.i} of scenario {name!r} is in both "
                        f"{into[trial.i][1]} and {shard.source}",
                        source=shard.source,
                        next_step="merge the shards of one run; each trial belongs to one shard",
                    )
                into[trial.i] = (trial, shard.source)
    merged: dict[str, ScenarioResult] = {}
    for name in sorted(collected):
        found = collected[name]
        absent = [i for i in range(trials) if i not in found]
        extra = sorted(i for i in found if not 0 <= i < trials)
        if absent or extra:
            problem = (
                f"misses trial{'s' if len(absent) > 1 else ''} {_list(absent)}"
                if absent
                else f"has trials beyond the plan's {trials}: {_list(extra)}"
            )
            raise _mismatch(
                f"scenario {name!r} {problem} after merging",
                next_step="pass every shard report of the run, each complete",
            )
        template = described[name][0]
        merged[name] = summarize(
            [trial for trial, _ in found.values()],
            source=template.source,
            origin=template.origin,
            fingerprint=template.fingerprint,
            definition=template.definition,
            description=template.description,
            prompt=template.prompt,
        )
    return merged


def _check_description(
    name: str,
    result: ScenarioResult,
    source: str,
    described: dict[str, tuple[ScenarioResult, str]],
) -> None:
    """The scenario's source, origin, fingerprint and description agree across shards."""
    if name not in described:
        described[name] = (result, source)
        return
    earlier, earlier_source = described[name]
    for what in ("fingerprint", "definition", "source", "origin", "description", "prompt"):
        if getattr(result, what) != getattr(earlier, what):
            raise _mismatch(
                f"scenario {name!r} has a different {what} in {source} and {earlier_source}",
                source=source,
                next_step="merge only the shards of one run",
            )


def _merge_gateway(metas: list[Meta]) -> GatewaySummary | None:
    """Every shard's gateway figures summed (``None`` unless every shard had the gateway on)."""
    found = [m.gateway for m in metas if m.gateway is not None]
    if not found or len(found) != len(metas):
        return None
    return GatewaySummary(
        calls=sum(g.calls for g in found),
        refused=sum(g.refused for g in found),
        fallback_trials=sum(g.fallback_trials for g in found),
    )


def _merge_meta(metas: list[Meta]) -> Meta:
    started = [m.started_at for m in metas if m.started_at]
    ended = [m.ended_at for m in metas if m.ended_at]
    walls = [m.wall_time_ms for m in metas if m.wall_time_ms is not None]
    jobs = [m.jobs for m in metas if m.jobs is not None]
    update: dict[str, object] = {
        "shard": None,
        "started_at": min(started, key=_instant) if started else None,
        "ended_at": max(ended, key=_instant) if ended else None,
        "wall_time_ms": max(walls) if walls else None,
        "jobs": sum(jobs) if len(jobs) == len(metas) else None,
        "interrupted": True if any(m.interrupted for m in metas) else None,
        "run_root": None,
        "totals": None,  # recomputed by finalize()
        "shard_balance": _merge_balance(metas),
        "gateway": _merge_gateway(metas),
        "host_source": _merge_host_source(metas),
    }
    # Any other optional field (e.g. resumedFrom) stands only when every shard agrees.
    for field, info in Meta.model_fields.items():
        if field in update or info.default is not None:
            continue
        values = [getattr(m, field) for m in metas]
        if any(value != values[0] for value in values):
            update[field] = None
    return metas[0].model_copy(update=update)


def _host_of(meta: Meta) -> str | None:
    """What every shard's host must share: pinned (with its package integrity) or PATH's."""
    source = meta.host_source
    if source is None:
        return None
    return f"{source.kind} {source.integrity}" if source.integrity else source.kind


def _merge_host_source(metas: list[Meta]) -> HostSource | None:
    """The shards' common host source; the executable only when every shard ran the same."""
    first = metas[0].host_source
    if first is None or any(m.host_source is None for m in metas):
        return None
    if any(m.host_source != first for m in metas):
        return first.model_copy(update={"executable": None})
    return first


def _split_of(meta: Meta) -> tuple[object, ...] | None:
    """What decides a shard's split: the balancing, its source report, the shard sizes."""
    record = meta.shard_balance
    if record is None:
        return None
    return (record.by, record.from_run_id, [s.trials for s in record.shards], record.estimated)


def _check_same_split(shards: list[ShardReport]) -> None:
    """Every shard split the plan the same way (round robin, or from the same durations)."""
    first = shards[0]
    expected = _split_of(first.report.meta)
    for shard in shards[1:]:
        if _split_of(shard.report.meta) != expected:
            raise _mismatch(
                f"{shard.source} and {first.source} split the plan differently (their --balance "
                "or --balance-from differ), so their trials overlap or leave gaps",
                source=shard.source,
                next_step="run every shard with the same --balance options and the same "
                "--balance-from report, then merge again",
            )


def _merge_balance(metas: list[Meta]) -> ShardBalance | None:
    """The shards' common split, each shard's ``actualMs`` its wall time."""
    first = metas[0].shard_balance
    if first is None:
        return None
    loads = [
        load.model_copy(update={"actual_ms": meta.wall_time_ms})
        for load, meta in zip(first.shards, metas, strict=False)
    ]
    actual = [load.actual_ms for load in loads]
    longest = max(a for a in actual if a is not None) if None not in actual else None
    return first.model_copy(update={"shards": loads, "actual_makespan_ms": longest})


def _instant(stamp: str) -> datetime:
    """Parse an ISO 8601 time for ordering (``Z`` accepted, naive taken as UTC)."""
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _list(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:10])
    return shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def _mismatch(
    message: str,
    *,
    next_step: str,
    source: str | None = None,
    expected: str | None = None,
) -> DiagnosticError:
    return DiagnosticError(
        [
            error(
                "merge-mismatch",
                message,
                source=source,
                expected=expected,
                next=next_step,
            )
        ]
    )
