"""Read the history: runs by condition and date, a scenario's nights, flaky scenarios."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.engine import Connection, RowMapping

from .analysis import first_failing, flips, last_passing, outcome_of, window
from .models import FlakyScenario, HistoryRun, ScenarioHistory, ScenarioNight
from .quarantine import active_quarantines
from .schema import runs, scenarios

__all__ = [
    "RunFilter",
    "flaky_scenarios",
    "list_runs",
    "run_matrix",
    "scenario_history",
]

#: When a run happened: its start, else when it was recorded (reference reports).
_WHEN = func.coalesce(runs.c.started_at, runs.c.ingested_at)


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs a query considers."""

    host: str | None = None
    model: str | None = None
    arm: str | None = None
    since: str | None = None
    """First day (``YYYY-MM-DD``, UTC), inclusive."""
    until: str | None = None
    """Last day (``YYYY-MM-DD``, UTC), inclusive."""
    limit: int | None = None
    """Most runs (the newest)."""

    def apply(self, query: Select[Any]) -> Select[Any]:
        """Restrict ``query`` (over ``runs``) to these runs, newest first."""
        for column, value in ((runs.c.host, self.host), (runs.c.model, self.model)):
            if value is not None:
                query = query.where(column == value)
        if self.arm is not None:
            query = query.where(runs.c.arm == self.arm)
        if self.since is not None:
            query = query.where(self.since <= _WHEN)
        if self.until is not None:
            query = query.where(f"{self.until}T99" >= _WHEN)
        query = query.order_by(_WHEN.desc(), runs.c.id.desc())
        return query.limit(self.limit) if self.limit is not None else query


def list_runs(connection: Connection, where: RunFilter) -> list[HistoryRun]:
    """The runs matching ``where``, newest first."""
    counts = (
        select(scenarios.c.run_pk, func.count().label("n")).group_by(scenarios.c.run_pk).subquery()
    )
    query = where.apply(
        select(runs, func.coalesce(counts.c.n, 0).label("scenario_count")).outerjoin(
            counts, counts.c.run_pk == runs.c.id
        )
    )
    rows = list(connection.execute(query).mappings())
    blessed = _blessed(connection, [row["id"] for row in rows])
    return [_run(row, blessed.get(row["id"], [])) for row in rows]


def _blessed(connection: Connection, run_pks: Sequence[int]) -> dict[int, list[str]]:
    """Baseline names whose latest blessing is each run."""
    from .baselines import current_blessings

    found: dict[int, list[str]] = {}
    for run_pk, name in current_blessings(connection):
        if run_pk in run_pks:
            found.setdefault(run_pk, []).append(name)
    return {pk: sorted(names) for pk, names in found.items()}


def _run(row: RowMapping, blessed: list[str]) -> HistoryRun:
    return HistoryRun(
        run_id=row["run_id"],
        started_at=row["started_at"],
        host=row["host"],
        host_version=row["host_version"],
        model=row["model"],
        arm=row["arm"],
        harness=row["manifest_digest"],
        scenarios=int(row["scenario_count"]),
        trials=row["trial_count"],
        passed=row["passed"],
        tokens=row["tokens"],
        cost=row["cost"],
        shard=row["shard"],
        interrupted=bool(row["interrupted"]),
        resumed_from=row["resumed_from"],
        adaptive=bool(row["adaptive"]),
        absorbed=list(row["absorbed"] or []),
        blessed=blessed,
        report_path=row["report_path"],
    )


def _night(row: RowMapping) -> ScenarioNight:
    graded = int(row["graded"])
    low, high = row["wilson_low"], row["wilson_high"]
    return ScenarioNight(
        run_id=row["run_id"],
        started_at=row["started_at"],
        passed=row["passed"],
        graded=graded,
        executed=row["executed"],
        infra_errors=row["infra_errors"],
        skipped=row["skipped"],
        pass_rate=row["pass_rate"] if graded else None,
        interval=(low, high) if graded and low is not None and high is not None else None,
        outcome=outcome_of(int(row["passed"]), graded),
        partial=bool(row["interrupted"]) or row["shard"] is not None,
        resumed=row["resumed_from"] is not None,
        adaptive=bool(row["adaptive"]),
    )


_NIGHT_COLUMNS = (
    runs.c.run_id,
    runs.c.started_at,
    runs.c.interrupted,
    runs.c.shard,
    runs.c.resumed_from,
    runs.c.adaptive,
    scenarios.c.name,
    scenarios.c.passed,
    scenarios.c.graded,
    scenarios.c.executed,
    scenarios.c.infra_errors,
    scenarios.c.skipped,
    scenarios.c.pass_rate,
    scenarios.c.wilson_low,
    scenarios.c.wilson_high,
)


def scenario_history(
    connection: Connection, name: str, *, last: int, where: RunFilter
) -> ScenarioHistory | None:
    """``name`` over the last ``last`` runs that ran it (oldest first); None if none did."""
    query = RunFilter(
        host=where.host,
        model=where.model,
        arm=where.arm,
        since=where.since,
        until=where.until,
        limit=last,
    ).apply(select(*_NIGHT_COLUMNS).join(scenarios, scenarios.c.run_pk == runs.c.id))
    rows = list(connection.execute(query.where(scenarios.c.name == name)).mappings())
    if not rows:
        return None
    nights = [_night(row) for row in reversed(rows)]
    changes, pairs = flips([n.outcome for n in nights])
    return ScenarioHistory(
        scenario=name,
        nights=nights,
        window=window(nights),
        flips=changes,
        flip_rate=changes / pairs if pairs else None,
        flaky_runs=sum(1 for n in nights if n.outcome == "flaky"),
        first_failing=first_failing(nights),
        last_passing=last_passing(nights),
        quarantine=active_quarantines(connection).get(name),
    )


def run_matrix(
    connection: Connection, where: RunFilter
) -> tuple[list[HistoryRun], dict[str, dict[str, ScenarioNight]]]:
    """The runs matching ``where`` (oldest first) and each scenario's night per run id."""
    chosen = list(reversed(list_runs(connection, where)))
    ids = [r.run_id for r in chosen]
    matrix: dict[str, dict[str, ScenarioNight]] = {}
    for start in range(0, len(ids), 500):
        query = (
            select(*_NIGHT_COLUMNS)
            .join(scenarios, scenarios.c.run_pk == runs.c.id)
            .where(runs.c.run_id.in_(ids[start : start + 500]))
        )
        for row in connection.execute(query).mappings():
            matrix.setdefault(row["name"], {})[row["run_id"]] = _night(row)
    return chosen, dict(sorted(matrix.items()))


def flaky_scenarios(
    connection: Connection, *, last: int, where: RunFilter, min_runs: int = 2
) -> list[FlakyScenario]:
    """Scenarios whose outcome flips across the last ``last`` runs, most flips first."""
    chosen, matrix = run_matrix(
        connection,
        RunFilter(
            host=where.host,
            model=where.model,
            arm=where.arm,
            since=where.since,
            until=where.until,
            limit=last,
        ),
    )
    held = active_quarantines(connection)
    found = []
    for name, by_run in matrix.items():
        nights = [by_run[r.run_id] for r in chosen if r.run_id in by_run]
        outcomes = [n.outcome for n in nights]
        changes, pairs = flips(outcomes)
        mixed = sum(1 for o in outcomes if o == "flaky")
        if pairs + 1 < min_runs or (changes == 0 and mixed == 0):
            continue
        found.append(
            FlakyScenario(
                scenario=name,
                runs=pairs + 1,
                flips=changes,
                flip_rate=changes / pairs if pairs else 0.0,
                flaky_runs=mixed,
                window=window(nights),
                outcomes=outcomes,
                quarantined=name in held,
            )
        )
    found.sort(key=lambda f: (-f.flip_rate, -f.flips, -f.flaky_runs, f.scenario))
    return found
