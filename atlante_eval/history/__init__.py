"""The history store: every run's results in a database, for trends, baselines and gates.

:mod:`.location` resolves where the store is (``--history URL``, ``eval.history``,
or ``<project>/.atlante/eval/history.sqlite``) without importing the SQL layer;
:mod:`.backends` is the table of the two backends (SQLite, PostgreSQL);
:mod:`.schema` the tables and :mod:`.migrations` their versioned migrations (Alembic);
:mod:`.database` opens a store (migrating it, with the backend's locking);
:mod:`.ingest` records reports, idempotently; :mod:`.queries` lists runs and a
scenario's history; :mod:`.analysis` computes pass rates over nights, flakiness
and first failures from those rows; :mod:`.baselines` blesses runs and rebuilds
their reports; :mod:`.quarantine` keeps the quarantine list; :mod:`.gate` applies
quarantine and stability to ``--fail-on``; :mod:`.alerts` sends the after-run
webhook and writes the GitHub step summary; :mod:`.store` is the one interface
over all of it. Only :mod:`.location` is re-exported: everything else loads
SQLAlchemy and is imported by its path when a history is used.
"""

from __future__ import annotations

from .location import (
    BLESSED,
    DEFAULT_BASELINE,
    DEFAULT_HISTORY_FILE,
    HistoryLocation,
    blessed_name,
    history_location,
    parse_history_url,
)

__all__ = [
    "BLESSED",
    "DEFAULT_BASELINE",
    "DEFAULT_HISTORY_FILE",
    "HistoryLocation",
    "blessed_name",
    "history_location",
    "parse_history_url",
]
