"""Alembic's environment: migrate the connection the history store hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):  # pragma: no cover - only the store runs these
    raise RuntimeError("the history migrations run only through atlante-eval's store")
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
