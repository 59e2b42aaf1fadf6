"""The history store's backends, one table keyed by :data:`~atlante_eval.choices.HistoryBackend`.

Each backend says how to build its engine and how a writing transaction takes
the store's lock: SQLite in WAL mode with a busy timeout, every writer opening its
transaction with ``BEGIN IMMEDIATE`` (one writer at a time, readers never
blocked); PostgreSQL with a transaction-level advisory lock for schema
migrations and row locks (``SELECT … FOR UPDATE``) while a run is re-recorded.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from ..choices import HistoryBackend
from ..report import PublishError
from ..report.publish import check_below, ensure_gitignore
from .location import HistoryLocation

__all__ = ["BACKENDS", "BUSY_TIMEOUT_S", "WRITE_OPTION", "Backend"]

#: How long a SQLite writer waits for another one before giving up (seconds).
BUSY_TIMEOUT_S = 60.0
#: Execution option that marks a connection's transaction as a writing one.
WRITE_OPTION = "atlante_history_write"


@dataclass(frozen=True, slots=True)
class Backend:
    """How one database product is opened and locked."""

    engine: Callable[[HistoryLocation], Engine]
    """Build the engine for a location."""
    lock: Callable[[Connection, str], None]
    """Inside a writing transaction: take the store-wide lock named ``name``."""


def _sqlite_engine(location: HistoryLocation) -> Engine:
    assert location.path is not None
    atlante = location.path.parent.parent
    ours = location.path.parent.name == "eval" and atlante.name == ".atlante"
    try:
        if ours:
            # A project's own store: every part below the project root is ours and must
            # be a real directory (as for the run directories), and stays out of git.
            check_below(atlante.parent, location.path)
        location.path.parent.mkdir(parents=True, exist_ok=True)
        if ours:
            check_below(atlante.parent, location.path)
            ensure_gitignore(atlante)
    except PublishError as exc:
        raise OSError(str(exc)) from None
    file = os.fsencode(location.path)  # a path that is not UTF-8 opens too

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(file, timeout=BUSY_TIMEOUT_S, check_same_thread=False)

    engine = create_engine("sqlite+pysqlite://", poolclass=NullPool, creator=connect)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # Transactions are begun below, explicitly: pysqlite's own implicit BEGIN
        # would start every transaction DEFERRED and upgrade it to a write lock
        # later, which fails at once (no busy wait) when another writer holds it.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        writing = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")

    return engine


def _sqlite_lock(_connection: Connection, _name: str) -> None:
    """Nothing to take: ``BEGIN IMMEDIATE`` already holds the database's write lock."""


def _postgres_engine(location: HistoryLocation) -> Engine:
    return create_engine(location.url, poolclass=NullPool, connect_args={"connect_timeout": 10})


def _postgres_lock(connection: Connection, name: str) -> None:
    key = zlib.crc32(f"atlante-eval history {name}".encode())
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


BACKENDS: dict[HistoryBackend, Backend] = {
    "sqlite": Backend(engine=_sqlite_engine, lock=_sqlite_lock),
    "postgresql": Backend(engine=_postgres_engine, lock=_postgres_lock),
}
