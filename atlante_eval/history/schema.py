"""The history store's tables at the newest schema revision (SQLAlchemy Core).

The migrations in :mod:`.migrations` build exactly these tables; a test compares
them. Times are ISO 8601 UTC text (``2026-03-01T02:17:05.112Z``), which sorts
as time does on both backends; dates of a quarantine are ``YYYY-MM-DD``.
Transcripts are not stored: a trial keeps the path of its transcript relative to
the run directory the report was read from (``runs.run_dir``).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

__all__ = ["HEAD_REVISION", "baselines", "metadata", "quarantine", "runs", "scenarios", "trials"]

#: The newest schema revision (the last migration's id).
HEAD_REVISION = "0002"

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, unique=True),
    Column("started_at", String(40)),
    Column("ended_at", String(40)),
    Column("ingested_at", String(40), nullable=False),
    Column("host", String(64), nullable=False),
    Column("host_version", String(64)),
    Column("model", String(255), nullable=False),
    Column("model_version", String(255)),
    Column("arm", String(128)),
    Column("manifest_digest", String(128)),
    Column("plan_digest", String(128)),
    Column("shard", String(32)),
    Column("resumed_from", Text),
    Column("interrupted", Boolean, nullable=False),
    Column("adaptive", Boolean, nullable=False),
    Column("isolation", String(16)),
    Column("engine_version", String(64)),
    Column("trials_per_scenario", Integer),
    Column("wall_time_ms", BigInteger),
    Column("trial_count", Integer, nullable=False),
    Column("passed", Integer, nullable=False),
    Column("tokens", BigInteger),
    Column("cost", Float),
    Column("report_path", Text),
    Column("run_dir", Text),
    Column("absorbed", JSON),
    Column("meta", JSON, nullable=False),
    Column("adaptive_record", JSON),
)
Index("ix_runs_started", runs.c.started_at)
Index("ix_runs_condition", runs.c.host, runs.c.model, runs.c.arm)

scenarios = Table(
    "scenarios",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("arm", String(128)),
    Column("fingerprint", String(128)),
    Column("definition", String(128)),
    Column("executed", Integer, nullable=False),
    Column("graded", Integer, nullable=False),
    Column("passed", Integer, nullable=False),
    Column("infra_errors", Integer, nullable=False),
    Column("skipped", Integer, nullable=False),
    Column("pass_rate", Float, nullable=False),
    Column("wilson_low", Float),
    Column("wilson_high", Float),
    Column("stability", String(16)),
    Column("mean_duration_ms", BigInteger),
    Column("duration_p95_ms", BigInteger),
    Column("tokens", BigInteger),
    Column("cost", Float),
    Column("document", JSON, nullable=False),
    UniqueConstraint("run_pk", "name", name="uq_scenarios_run_name"),
)
Index("ix_scenarios_name", scenarios.c.name)

trials = Table(
    "trials",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("scenario_pk", Integer, ForeignKey("scenarios.id", ondelete="CASCADE"), nullable=False),
    Column("i", Integer, nullable=False),
    Column("verdict", String(32), nullable=False),
    Column("duration_ms", BigInteger, nullable=False),
    Column("tokens", BigInteger),
    Column("cost", Float),
    Column("model", String(255)),
    Column("started_at", String(40)),
    Column("error", Text),
    Column("checks", JSON),
    Column("transcript", Text),
    Column("trial_key", String(64), unique=True),
    Column("document", JSON, nullable=False),
)
Index("ix_trials_scenario", trials.c.scenario_pk)
Index("ix_trials_run", trials.c.run_pk)

baselines = Table(
    "baselines",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False),
    Column("host", String(64), nullable=False),
    Column("model", String(255), nullable=False),
    Column("arm", String(128)),
    Column("run_pk", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("blessed_by", String(255), nullable=False),
    Column("blessed_at", String(40), nullable=False),
    Column("reason", Text),
)
Index("ix_baselines_lookup", baselines.c.name, baselines.c.host, baselines.c.model)

quarantine = Table(
    "quarantine",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scenario", String(255), nullable=False),
    Column("reason", Text, nullable=False),
    Column("owner", String(255)),
    Column("until", String(10)),
    Column("added_by", String(255), nullable=False),
    Column("added_at", String(40), nullable=False),
    Column("removed_by", String(255)),
    Column("removed_at", String(40)),
)
Index("ix_quarantine_scenario", quarantine.c.scenario)
