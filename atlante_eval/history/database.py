"""Open a history store: build the engine, bring the schema to the newest revision.

Every SQLAlchemy error is translated here into a diagnostic (``history-unavailable``,
exit 3), so none reaches the user as a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from ..diagnostics import DiagnosticError, error
from .backends import BACKENDS, WRITE_OPTION, Backend
from .location import HistoryLocation
from .schema import HEAD_REVISION

__all__ = ["Database", "migrate", "open_database", "translated"]

_MIGRATIONS = Path(__file__).parent / "migrations"


@dataclass(frozen=True, slots=True)
class Database:
    """An open history store: its location, backend and engine."""

    location: HistoryLocation
    backend: Backend
    engine: Engine

    @contextmanager
    def write(self, lock: str = "store") -> Iterator[Connection]:
        """A writing transaction holding the store's lock ``lock``; committed on success."""
        with translated(self.location), self.engine.connect() as connection:
            connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                self.backend.lock(connection, lock)
                yield connection

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A reading transaction (a consistent snapshot)."""
        with translated(self.location), self.engine.connect() as connection, connection.begin():
            yield connection

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()


@contextmanager
def translated(location: HistoryLocation) -> Iterator[None]:
    """Turn a database (or file system) error into ``history-unavailable`` (exit 3)."""
    try:
        yield
    except (SQLAlchemyError, OSError) as exc:
        cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise DiagnosticError(
            [
                error(
                    "history-unavailable",
                    f"the history store {location.display} cannot be used",
                    cause=cause[0] if cause else type(exc).__name__,
                    next="check that the database is reachable and writable "
                    "(see docs/history.md), or pass --no-history",
                )
            ],
            exit_code=3,
        ) from None


def open_database(location: HistoryLocation, *, revision: str = HEAD_REVISION) -> Database:
    """Open the store at ``location`` and migrate it to ``revision`` (default: the newest).

    Raises:
        DiagnosticError: ``history-unavailable`` (exit 3) when it cannot be reached,
            ``history-schema-newer`` (exit 3) when a newer atlante-eval wrote it.
    """
    backend = BACKENDS[location.backend]
    with translated(location):
        engine = backend.engine(location)
    database = Database(location, backend, engine)
    try:
        migrate(database, revision)
    except BaseException:
        database.close()
        raise
    return database


def migrate(database: Database, revision: str = HEAD_REVISION) -> None:
    """Bring the schema to ``revision`` under the migration lock (a no-op when it is there)."""
    if _current(database) == revision:
        return
    from alembic import command
    from alembic.config import Config

    with database.write("migrations") as connection:
        current = _revision_of(connection)
        if current == revision:
            return
        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def _current(database: Database) -> str | None:
    with database.read() as connection:
        return _revision_of(connection)


def _revision_of(connection: Connection) -> str | None:
    """The stored schema revision (None for an empty database); refuse an unknown one."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    # Read as Alembic stores it, without loading Alembic (and Mako): a run that finds
    # the schema current never imports them (docs/performance.md).
    stored = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(stored) > 1:
        from alembic.runtime.migration import MigrationContext

        current = MigrationContext.configure(connection).get_current_revision()
    else:
        current = stored[0] if stored else None
    if current is not None and current > HEAD_REVISION:
        raise DiagnosticError(
            [
                error(
                    "history-schema-newer",
                    f"the history store has schema revision {current}, newer than this "
                    f"atlante-eval knows ({HEAD_REVISION})",
                    next="upgrade atlante-eval to the version that wrote the store",
                )
            ],
            exit_code=3,
        )
    return current
