"""The quarantine list: scenarios that still run and are reported, but gates ignore.

A quarantine ends when removed or, with ``until``, by itself after that day (UTC).
Every entry stays in the table: who quarantined what, when, why, and who ended it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from sqlalchemy import ColumnElement, insert, or_, select, update
from sqlalchemy.engine import Connection, RowMapping

from ..report import utc_timestamp
from .database import Database
from .models import Quarantine
from .schema import quarantine

__all__ = ["active_quarantines", "add_quarantine", "list_quarantines", "remove_quarantine", "today"]


def today() -> str:
    """Today's UTC date as ``YYYY-MM-DD``."""
    return datetime.now(UTC).date().isoformat()


def add_quarantine(
    database: Database,
    scenario: str,
    *,
    reason: str,
    owner: str | None,
    until: date | None,
    by: str,
) -> Quarantine:
    """Quarantine ``scenario`` (replacing a quarantine already in force for it)."""
    now = utc_timestamp()
    with database.write("quarantine") as connection:
        _end(connection, scenario, by=by, at=now)
        connection.execute(
            insert(quarantine).values(
                scenario=scenario,
                reason=reason,
                owner=owner,
                until=until.isoformat() if until is not None else None,
                added_by=by,
                added_at=now,
            )
        )
    return Quarantine(
        scenario=scenario,
        reason=reason,
        owner=owner,
        until=until.isoformat() if until is not None else None,
        added_by=by,
        added_at=now,
        active=True,
    )


def remove_quarantine(database: Database, scenario: str, *, by: str) -> bool:
    """End the quarantine in force for ``scenario``; False when there is none."""
    with database.write("quarantine") as connection:
        return _end(connection, scenario, by=by, at=utc_timestamp()) > 0


def _end(connection: Connection, scenario: str, *, by: str, at: str) -> int:
    result = connection.execute(
        update(quarantine)
        .where(quarantine.c.scenario == scenario, _in_force(today()))
        .values(removed_by=by, removed_at=at)
    )
    return int(result.rowcount or 0)


def _in_force(day: str) -> ColumnElement[bool]:
    return (quarantine.c.removed_at.is_(None)) & or_(
        quarantine.c.until.is_(None), quarantine.c.until >= day
    )


def list_quarantines(connection: Connection, *, everything: bool = False) -> list[Quarantine]:
    """Quarantines in force (or every one ever, ``everything``), by scenario then time."""
    day = today()
    query = select(quarantine).order_by(quarantine.c.scenario, quarantine.c.added_at)
    if not everything:
        query = query.where(_in_force(day))
    return [_model(row, day) for row in connection.execute(query).mappings()]


def active_quarantines(connection: Connection) -> dict[str, Quarantine]:
    """The quarantines in force today, by scenario."""
    return {q.scenario: q for q in list_quarantines(connection)}


def _model(row: RowMapping, day: str) -> Quarantine:
    active = row["removed_at"] is None and (row["until"] is None or row["until"] >= day)
    return Quarantine(
        scenario=row["scenario"],
        reason=row["reason"],
        owner=row["owner"],
        until=row["until"],
        added_by=row["added_by"],
        added_at=row["added_at"],
        removed_by=row["removed_by"],
        removed_at=row["removed_at"],
        active=active,
    )
