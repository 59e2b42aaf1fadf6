"""Blessed baselines: the accepted run per host, model and arm, and its report rebuilt.

Blessing is explicit and recorded: every blessing is a row (who, when, why), and
the newest row of a name for a host, model and arm is the baseline. The report of
a blessed run is rebuilt from the store (without diffs), so ``compare blessed``
works on a machine that never saw the run's directory.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, RowMapping

from ..diagnostics import DiagnosticError, error
from ..report import RunReport, utc_timestamp
from .database import Database
from .location import DEFAULT_BASELINE
from .models import Blessing
from .schema import baselines, runs, scenarios, trials

__all__ = [
    "bless_run",
    "current_blessings",
    "find_baseline",
    "list_blessings",
    "load_run_report",
    "stored_run_dir",
]


def bless_run(database: Database, run_id: str, *, name: str, by: str, reason: str) -> Blessing:
    """Bless the stored run ``run_id`` as baseline ``name`` for its host, model and arm.

    Raises:
        DiagnosticError: ``history-not-found`` (exit 2) when the store lacks the run.
    """
    with database.write("baselines") as connection:
        row = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        if row is None:
            raise _missing_run(run_id)
        at = utc_timestamp()
        connection.execute(
            insert(baselines).values(
                name=name,
                host=row["host"],
                model=row["model"],
                arm=row["arm"],
                run_pk=row["id"],
                blessed_by=by,
                blessed_at=at,
                reason=reason,
            )
        )
    return Blessing(
        name=name,
        run_id=run_id,
        host=row["host"],
        model=row["model"],
        arm=row["arm"],
        blessed_by=by,
        blessed_at=at,
        reason=reason,
    )


def _missing_run(run_id: str) -> DiagnosticError:
    return DiagnosticError(
        [
            error(
                "history-not-found",
                f"the history has no run {run_id!r}",
                next="list the recorded runs with `atlante-eval history list`, or record the "
                "report first with `atlante-eval history ingest REPORT`",
            )
        ]
    )


def _blessing_rows(connection: Connection) -> list[RowMapping]:
    query = (
        select(baselines, runs.c.run_id)
        .join(runs, runs.c.id == baselines.c.run_pk)
        .order_by(baselines.c.blessed_at, baselines.c.id)
    )
    return list(connection.execute(query).mappings())


def _current(connection: Connection) -> dict[tuple[str, str, str, str | None], RowMapping]:
    latest: dict[tuple[str, str, str, str | None], RowMapping] = {}
    for row in _blessing_rows(connection):
        latest[(row["name"], row["host"], row["model"], row["arm"])] = row
    return latest


def current_blessings(connection: Connection) -> list[tuple[int, str]]:
    """``(run pk, name)`` of every baseline in force."""
    return [(row["run_pk"], row["name"]) for row in _current(connection).values()]


def list_blessings(connection: Connection, *, everything: bool = False) -> list[Blessing]:
    """The baselines in force (or every blessing ever, ``everything``), oldest first."""
    rows = _blessing_rows(connection) if everything else list(_current(connection).values())
    return [_blessing(row) for row in rows]


def _blessing(row: RowMapping) -> Blessing:
    return Blessing(
        name=row["name"],
        run_id=row["run_id"],
        host=row["host"],
        model=row["model"],
        arm=row["arm"],
        blessed_by=row["blessed_by"],
        blessed_at=row["blessed_at"],
        reason=row["reason"],
    )


def find_baseline(
    connection: Connection, name: str, *, host: str, model: str | None, arm: str | None = None
) -> Blessing:
    """The baseline ``name`` for ``host``, ``model`` and ``arm`` (any model: the newest).

    Raises:
        DiagnosticError: ``history-no-baseline`` (exit 2) when none is blessed.
    """
    current = _current(connection)
    if model is None:
        found = max(
            (
                row
                for key, row in current.items()
                if key[0] == name and key[1] == host and key[3] == arm
            ),
            key=lambda row: (row["blessed_at"], row["id"]),
            default=None,
        )
    else:
        found = current.get((name, host, model, arm))
    if found is not None:
        return _blessing(found)
    others = sorted(
        f"{key[0]} ({key[1]}, {key[2]})" for key in _current(connection) if key[0] == name
    )
    raise DiagnosticError(
        [
            error(
                "history-no-baseline",
                f"no baseline {name!r} is blessed for host {host}"
                + (f" and model {model}" if model is not None else "")
                + (f"; blessed for other conditions: {', '.join(others)}" if others else ""),
                next="bless an accepted run with `atlante-eval history bless RUN_ID"
                + (f" --name {name}" if name != DEFAULT_BASELINE else "")
                + ' --reason "..."`',
            )
        ]
    )


def stored_run_dir(connection: Connection, run_id: str) -> str | None:
    """The run directory the stored run ``run_id`` was recorded from (``None``: unknown)."""
    value = connection.execute(select(runs.c.run_dir).where(runs.c.run_id == run_id)).scalar()
    return value if isinstance(value, str) else None


def load_run_report(connection: Connection, run_id: str) -> RunReport:
    """Rebuild the report of the stored run ``run_id`` (diffs are not stored).

    Raises:
        DiagnosticError: ``history-not-found`` (exit 2) when the store lacks the run.
    """
    row = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
    if row is None:
        raise _missing_run(run_id)
    by_scenario: dict[int, list[dict[str, Any]]] = {}
    query = select(trials.c.scenario_pk, trials.c.document).where(trials.c.run_pk == row["id"])
    for scenario_pk, document in connection.execute(query.order_by(trials.c.i)):
        by_scenario.setdefault(scenario_pk, []).append(document)
    results: dict[str, Any] = {}
    query = select(scenarios.c.id, scenarios.c.name, scenarios.c.document)
    listed = query.where(scenarios.c.run_pk == row["id"]).order_by(scenarios.c.name)
    for scenario in connection.execute(listed).mappings():
        stored: dict[str, Any] = scenario["document"]
        results[scenario["name"]] = {**stored, "trials": by_scenario.get(scenario["id"], [])}
    document = {"runId": row["run_id"], "meta": row["meta"], "scenarios": results}
    if row["adaptive_record"] is not None:
        document["adaptive"] = row["adaptive_record"]
    return RunReport.model_validate(document)
