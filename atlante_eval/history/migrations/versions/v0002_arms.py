"""Arms (variants): an ``arm`` column on runs, scenario results and baselines.

Null for every run recorded so far (a run compares one harness); variants
(several arms in one run) fill it. Baselines are looked up by host, model and arm.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_ARMED = ("runs", "scenarios", "baselines")


def upgrade() -> None:
    """Add the nullable ``arm`` columns and the run lookup by condition."""
    for table in _ARMED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("arm", sa.String(128), nullable=True))
    op.create_index("ix_runs_condition", "runs", ["host", "model", "arm"])


def downgrade() -> None:
    """Drop the ``arm`` columns."""
    op.drop_index("ix_runs_condition", table_name="runs")
    for table in _ARMED:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("arm")
