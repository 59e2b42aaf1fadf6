"""Record reports in the history store, idempotently.

A run is known by its run id and by its trials: a trial that recorded its start
time has a key (scenario, index, start, fingerprint), so the same trials seen
again are the same run whatever the report around them. Recording a report:

- nothing in the store shares its run id or a trial: a new run;
- everything it holds is already in one stored run (the same report twice, or a
  shard of a merged report already recorded): nothing changes;
- otherwise it supersedes the runs it overlaps (the shards it merges, the
  interrupted run it resumed): they are replaced by it in one transaction, their
  run ids kept in ``absorbed``, their blessings moved to it.

Concurrent writers are safe: SQLite serialises them (``BEGIN IMMEDIATE``);
on PostgreSQL the overlapped runs are locked ``FOR UPDATE`` and a writer that
loses a race on the unique keys (or a deadlock) retries from the start.

A run with arms (``eval.variants``) is recorded as one stored run per arm, in
one transaction: the control arm's under the report's run id, every other arm's
under ``<runId>@<arm>`` (:func:`arm_run_id`), each with its ``arm`` column (the
run's and its scenarios') set, so each arm has its own history, baselines and
gate, as runs of one harness on one model do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from ..report import (
    RunReport,
    ScenarioResult,
    TrialResult,
    arm_names,
    arm_view,
    statistics_of,
    utc_timestamp,
)
from .database import Database
from .models import IngestResult
from .schema import baselines, runs, scenarios, trials

__all__ = ["IngestResult", "arm_run_id", "ingest_report", "trial_key"]

_RETRIES = 5
_RUN_ID_CHARS = 64  # runs.run_id's width
_CHUNK = 500
_RETRYABLE_STATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock


def trial_key(scenario: str, result: ScenarioResult, trial: TrialResult) -> str | None:
    """The identity of a trial across reports (None when it recorded no start time)."""
    if not trial.started_at:
        return None
    parts = (scenario, str(trial.i), trial.started_at, result.fingerprint or "")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def ingest_report(
    database: Database,
    report: RunReport,
    *,
    report_path: str | None = None,
    run_dir: str | None = None,
) -> IngestResult:
    """Record ``report`` (read from ``report_path``, its transcripts under ``run_dir``)."""
    for attempt in range(_RETRIES):
        try:
            with database.write("ingest") as connection:
                return _ingest_arms(connection, report, report_path, run_dir)
        except DBAPIError as exc:
            retry = isinstance(exc, IntegrityError) or _state(exc) in _RETRYABLE_STATES
            if not retry or attempt == _RETRIES - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def arm_run_id(run_id: str, arm: str) -> str:
    """The stored run id of a non-control arm: ``<runId>@<arm>`` (hashed when too long)."""
    text = f"{run_id}@{arm}"
    if len(text) <= _RUN_ID_CHARS:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: _RUN_ID_CHARS - 9]}~{digest}"


def _ingest_arms(
    connection: Connection, report: RunReport, report_path: str | None, run_dir: str | None
) -> IngestResult:
    """Record ``report``, each of its arms as its own stored run (one run without arms)."""
    names = arm_names(report)
    if not names:
        return _ingest(connection, report, report_path, run_dir)
    done = []
    for arm in names:
        view = arm_view(report, arm)
        if arm != names[0]:
            view = view.model_copy(update={"run_id": arm_run_id(report.run_id, arm)})
        done.append(_ingest(connection, view, report_path, run_dir, arm=arm))
    statuses = {r.status for r in done}
    status: Literal["recorded", "unchanged", "replaced"] = (
        "replaced"
        if "replaced" in statuses
        else "recorded"
        if "recorded" in statuses
        else "unchanged"
    )
    absorbed = sorted({a for r in done for a in r.absorbed})
    return IngestResult(report.run_id, status, sum(r.trials for r in done), absorbed)


def _state(exc: DBAPIError) -> str | None:
    return getattr(exc.orig, "sqlstate", None)


def _ingest(
    connection: Connection,
    report: RunReport,
    report_path: str | None,
    run_dir: str | None,
    *,
    arm: str | None = None,
) -> IngestResult:
    keys = {
        key
        for name, result in report.scenarios.items()
        for trial in result.trials
        if (key := trial_key(name, result, trial)) is not None
    }
    count = len(report.all_trials())
    overlapping = _overlapping(connection, report.run_id, keys)
    if overlapping:
        held = _keys_of(connection, overlapping)
        for run_pk, run_id in overlapping.items():
            stored = held.get(run_pk, set())
            same_id = run_id == report.run_id
            if keys <= stored and (keys or same_id) and _trial_count(connection, run_pk) >= count:
                return IngestResult(run_id, "unchanged", count)
        _lock(connection, list(overlapping))
    absorbed = list(overlapping.values())
    if report.run_id in absorbed:  # the same run id, re-recorded with more trials
        connection.execute(
            update(runs).where(runs.c.run_id == report.run_id).values(run_id=f"{report.run_id}~")
        )
        absorbed.remove(report.run_id)
    run_pk = _insert_run(connection, report, report_path, run_dir, absorbed, arm)
    if overlapping:
        # The superseded runs' blessings move to the new run; then they go, trials and all,
        # before the new trials take their keys.
        connection.execute(
            update(baselines).where(baselines.c.run_pk.in_(list(overlapping))).values(run_pk=run_pk)
        )
        connection.execute(delete(runs).where(runs.c.id.in_(list(overlapping))))
    for name, result in report.scenarios.items():
        _insert_scenario(connection, run_pk, name, result, arm)
    if overlapping:
        return IngestResult(report.run_id, "replaced", count, sorted(absorbed))
    return IngestResult(report.run_id, "recorded", count)


def _overlapping(connection: Connection, run_id: str, keys: Iterable[str]) -> dict[int, str]:
    """Stored runs sharing the run id or a trial key: ``{run pk: run id}``."""
    same = select(runs.c.id, runs.c.run_id).where(runs.c.run_id == run_id)
    # not dict(result): a Result has keys(), so dict() would read it as a mapping
    found = {pk: rid for pk, rid in connection.execute(same)}  # noqa: C416
    for chunk in _chunks(sorted(keys)):
        query = (
            select(runs.c.id, runs.c.run_id)
            .join(trials, trials.c.run_pk == runs.c.id)
            .where(trials.c.trial_key.in_(chunk))
            .distinct()
        )
        found.update((pk, rid) for pk, rid in connection.execute(query))
    return found


def _keys_of(connection: Connection, run_pks: Iterable[int]) -> dict[int, set[str]]:
    held: dict[int, set[str]] = {}
    query = select(trials.c.run_pk, trials.c.trial_key).where(
        trials.c.run_pk.in_(list(run_pks)), trials.c.trial_key.is_not(None)
    )
    for run_pk, key in connection.execute(query):
        held.setdefault(run_pk, set()).add(key)
    return held


def _trial_count(connection: Connection, run_pk: int) -> int:
    value = connection.execute(select(runs.c.trial_count).where(runs.c.id == run_pk)).scalar()
    return int(value or 0)


def _lock(connection: Connection, run_pks: list[int]) -> None:
    """Lock the runs about to be superseded (PostgreSQL row locks; SQLite holds the database)."""
    connection.execute(select(runs.c.id).where(runs.c.id.in_(run_pks)).with_for_update()).all()


def _chunks(values: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(values), _CHUNK):
        yield list(values[start : start + _CHUNK])


def _insert_run(
    connection: Connection,
    report: RunReport,
    report_path: str | None,
    run_dir: str | None,
    absorbed: list[str],
    arm: str | None,
) -> int:
    meta = report.meta
    all_trials = report.all_trials()
    if absorbed:
        earlier = connection.execute(
            select(runs.c.absorbed).where(runs.c.run_id.in_(absorbed))
        ).scalars()
        absorbed = sorted({*absorbed, *(r for before in earlier if before for r in before)})
    values: dict[str, Any] = {
        "run_id": report.run_id,
        "started_at": meta.started_at,
        "ended_at": meta.ended_at,
        "ingested_at": utc_timestamp(),
        "host": meta.host,
        "host_version": meta.host_version,
        "model": meta.model,
        "model_version": meta.model_version,
        "arm": arm,
        "manifest_digest": meta.manifest_digest,
        "plan_digest": meta.plan_digest,
        "shard": meta.shard,
        "resumed_from": meta.resumed_from,
        "interrupted": bool(meta.interrupted),
        "adaptive": report.adaptive is not None,
        "isolation": meta.isolation,
        "engine_version": meta.atlante,
        "trials_per_scenario": meta.config.trials,
        "wall_time_ms": meta.wall_time_ms,
        "trial_count": len(all_trials),
        "passed": sum(1 for t in all_trials if t.verdict == "pass"),
        "tokens": meta.totals.tokens if meta.totals else sum(t.tokens or 0 for t in all_trials),
        "cost": meta.totals.cost if meta.totals else sum(t.cost or 0.0 for t in all_trials),
        "report_path": report_path,
        "run_dir": run_dir,
        "absorbed": absorbed or None,
        "meta": meta.model_dump(mode="json", by_alias=True, exclude_none=True),
        "adaptive_record": report.adaptive.model_dump(mode="json", by_alias=True, exclude_none=True)
        if report.adaptive is not None
        else None,
    }
    primary = connection.execute(insert(runs).values(**values)).inserted_primary_key
    assert primary is not None
    return int(primary[0])


def _insert_scenario(
    connection: Connection, run_pk: int, name: str, result: ScenarioResult, arm: str | None
) -> None:
    stats = statistics_of(result)
    graded = stats.graded > 0
    document = result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"trials"})
    primary = connection.execute(
        insert(scenarios).values(
            run_pk=run_pk,
            name=name,
            arm=arm,
            fingerprint=result.fingerprint,
            definition=result.definition,
            executed=stats.executed,
            graded=stats.graded,
            passed=stats.passed,
            infra_errors=stats.infra_errors,
            skipped=stats.skipped,
            pass_rate=stats.pass_rate_graded,
            wilson_low=stats.wilson95[0] if graded else None,
            wilson_high=stats.wilson95[1] if graded else None,
            stability=stats.stability,
            mean_duration_ms=result.mean_duration_ms,
            duration_p95_ms=result.spread.duration_p95_ms,
            tokens=result.tokens,
            cost=result.cost,
            document=document,
        )
    ).inserted_primary_key
    assert primary is not None
    scenario_pk = int(primary[0])
    rows = [_trial_row(run_pk, scenario_pk, name, result, trial) for trial in result.trials]
    if rows:
        connection.execute(insert(trials), rows)


def _trial_row(
    run_pk: int, scenario_pk: int, name: str, result: ScenarioResult, trial: TrialResult
) -> dict[str, Any]:
    return {
        "run_pk": run_pk,
        "scenario_pk": scenario_pk,
        "i": trial.i,
        "verdict": trial.verdict,
        "duration_ms": trial.duration_ms,
        "tokens": trial.tokens,
        "cost": trial.cost,
        "model": trial.model,
        "started_at": trial.started_at,
        "error": trial.error,
        "checks": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in trial.checks
        ]
        if trial.checks is not None
        else None,
        "transcript": trial.transcript,
        "trial_key": trial_key(name, result, trial),
        # The diff stays in the run directory's report: it can be 20,000 characters a trial.
        "document": trial.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude={"diff"}
        ),
    }
