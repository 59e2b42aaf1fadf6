"""The first schema: runs, their scenarios and trials, baselines and quarantine.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the tables of schema 0001."""
    _runs()
    _scenarios()
    _trials()
    op.create_table(
        "baselines",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("host", sa.String(64), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column(
            "run_pk", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("blessed_by", sa.String(255), nullable=False),
        sa.Column("blessed_at", sa.String(40), nullable=False),
        sa.Column("reason", sa.Text),
    )
    op.create_index("ix_baselines_lookup", "baselines", ["name", "host", "model"])
    op.create_table(
        "quarantine",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("scenario", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("owner", sa.String(255)),
        sa.Column("until", sa.String(10)),
        sa.Column("added_by", sa.String(255), nullable=False),
        sa.Column("added_at", sa.String(40), nullable=False),
        sa.Column("removed_by", sa.String(255)),
        sa.Column("removed_at", sa.String(40)),
    )
    op.create_index("ix_quarantine_scenario", "quarantine", ["scenario"])


def _runs() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False, unique=True),
        sa.Column("started_at", sa.String(40)),
        sa.Column("ended_at", sa.String(40)),
        sa.Column("ingested_at", sa.String(40), nullable=False),
        sa.Column("host", sa.String(64), nullable=False),
        sa.Column("host_version", sa.String(64)),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("model_version", sa.String(255)),
        sa.Column("manifest_digest", sa.String(128)),
        sa.Column("plan_digest", sa.String(128)),
        sa.Column("shard", sa.String(32)),
        sa.Column("resumed_from", sa.Text),
        sa.Column("interrupted", sa.Boolean, nullable=False),
        sa.Column("adaptive", sa.Boolean, nullable=False),
        sa.Column("isolation", sa.String(16)),
        sa.Column("engine_version", sa.String(64)),
        sa.Column("trials_per_scenario", sa.Integer),
        sa.Column("wall_time_ms", sa.BigInteger),
        sa.Column("trial_count", sa.Integer, nullable=False),
        sa.Column("passed", sa.Integer, nullable=False),
        sa.Column("tokens", sa.BigInteger),
        sa.Column("cost", sa.Float),
        sa.Column("report_path", sa.Text),
        sa.Column("run_dir", sa.Text),
        sa.Column("absorbed", sa.JSON),
        sa.Column("meta", sa.JSON, nullable=False),
        sa.Column("adaptive_record", sa.JSON),
    )
    op.create_index("ix_runs_started", "runs", ["started_at"])


def _scenarios() -> None:
    op.create_table(
        "scenarios",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "run_pk", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(128)),
        sa.Column("definition", sa.String(128)),
        sa.Column("executed", sa.Integer, nullable=False),
        sa.Column("graded", sa.Integer, nullable=False),
        sa.Column("passed", sa.Integer, nullable=False),
        sa.Column("infra_errors", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
        sa.Column("pass_rate", sa.Float, nullable=False),
        sa.Column("wilson_low", sa.Float),
        sa.Column("wilson_high", sa.Float),
        sa.Column("stability", sa.String(16)),
        sa.Column("mean_duration_ms", sa.BigInteger),
        sa.Column("duration_p95_ms", sa.BigInteger),
        sa.Column("tokens", sa.BigInteger),
        sa.Column("cost", sa.Float),
        sa.Column("document", sa.JSON, nullable=False),
        sa.UniqueConstraint("run_pk", "name", name="uq_scenarios_run_name"),
    )
    op.create_index("ix_scenarios_name", "scenarios", ["name"])


def _trials() -> None:
    op.create_table(
        "trials",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "run_pk", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "scenario_pk",
            sa.Integer,
            sa.ForeignKey("scenarios.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("i", sa.Integer, nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("duration_ms", sa.BigInteger, nullable=False),
        sa.Column("tokens", sa.BigInteger),
        sa.Column("cost", sa.Float),
        sa.Column("model", sa.String(255)),
        sa.Column("started_at", sa.String(40)),
        sa.Column("error", sa.Text),
        sa.Column("checks", sa.JSON),
        sa.Column("transcript", sa.Text),
        sa.Column("trial_key", sa.String(64), unique=True),
        sa.Column("document", sa.JSON, nullable=False),
    )
    op.create_index("ix_trials_scenario", "trials", ["scenario_pk"])
    op.create_index("ix_trials_run", "trials", ["run_pk"])


def downgrade() -> None:
    """Drop every table of schema 0001."""
    for table in ("quarantine", "baselines", "trials", "scenarios", "runs"):
        op.drop_table(table)
