"""The database schema at the newest migration, as SQLAlchemy Core tables for the queries.

The migrations (``autoscaler/state/migrations/versions``) create and change the real tables; this file
describes where they end up. A test compares the two, so they cannot drift apart. Every name carries
the ``autoscaler_`` prefix so the tables can share a PostgreSQL database with other applications.
Times are epoch milliseconds (BIGINT); a NULL metric is a NaN ("not measured") sample value.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "CUSTOM_WINDOW",
    "EVENTS",
    "JOB_STATE",
    "LEASES",
    "LOAD_HISTORY",
    "METADATA",
    "METRIC_WINDOW",
    "SCALING_HISTORY",
    "VERSION_TABLE",
    "WINDOW_SAMPLE_COLUMNS",
]

VERSION_TABLE = "autoscaler_alembic_version"  # Alembic's, renamed so it cannot clash with an app's own
KEY = sa.String(512)  # a job key: "cluster/job name"

METADATA = sa.MetaData()

JOB_STATE = sa.Table(
    "autoscaler_job_state",
    METADATA,
    sa.Column("job_key", KEY, primary_key=True),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("data", sa.Text, nullable=False),  # JSON: autoscaler.state.codec.encode_state
    sa.Column("history_digest", sa.String(64), nullable=False),  # of the job's history rows
    sa.Column("last_rescale_ms", sa.BigInteger, nullable=True),  # copied out of data for SQL queries
    sa.Column("updated_at_ms", sa.BigInteger, nullable=False),  # wall clock of the write
)

SCALING_HISTORY = sa.Table(
    "autoscaler_scaling_history",
    METADATA,
    sa.Column("job_key", KEY, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),  # position in JobState.history, oldest first
    sa.Column("ts_ms", sa.BigInteger, nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("data", sa.Text, nullable=False),  # JSON: autoscaler.state.codec.encode_record
)

# VertexSample fields, one column each (a test checks they match the dataclass).
WINDOW_SAMPLE_COLUMNS = (
    "busy_time_ms_per_s",
    "backpressured_ms_per_s",
    "num_records_in",
    "num_records_out",
    "accumulated_busy_time_ms",
    "num_records_in_per_s",
    "pending_records",
    "observed_tpr",
    "accumulated_busy_time_agg_ms",
)

METRIC_WINDOW = sa.Table(
    "autoscaler_metric_window",
    METADATA,
    sa.Column("job_key", KEY, primary_key=True),
    sa.Column("ts_ms", sa.BigInteger, primary_key=True),
    sa.Column("vertex", sa.String(128), primary_key=True),
    sa.Column("running_since_ms", sa.BigInteger, nullable=False),
    *(sa.Column(name, sa.Double, nullable=True) for name in WINDOW_SAMPLE_COLUMNS),
)

# Measured custom metrics of each tick (a row per tick, scope and name): the custom part of the window.
CUSTOM_WINDOW = sa.Table(
    "autoscaler_custom_window",
    METADATA,
    sa.Column("job_key", KEY, primary_key=True),
    sa.Column("ts_ms", sa.BigInteger, primary_key=True),
    sa.Column("scope", sa.String(128), primary_key=True),  # a vertex id, or "" for a job-level metric
    sa.Column("name", sa.String(256), primary_key=True),
    sa.Column("value", sa.Double, nullable=False),
)

EVENTS = sa.Table(
    "autoscaler_events",
    METADATA,
    # INTEGER on SQLite: only "INTEGER PRIMARY KEY" is its auto-incrementing rowid.
    sa.Column(
        "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    sa.Column("job_key", KEY, nullable=False),
    sa.Column("type", sa.String(16), nullable=False),
    sa.Column("reason", sa.String(64), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("message_key", sa.String(512), nullable=False),  # "" = dedup on the message
    sa.Column("dedup_key", sa.String(64), nullable=False),  # sha256 of (job key, type, reason, key)
    sa.Column("ts_ms", sa.BigInteger, nullable=False),  # first occurrence
    sa.Column("last_ms", sa.BigInteger, nullable=False),  # latest occurrence counted in this row
    sa.Column("count", sa.Integer, nullable=False),
    sa.Index("ix_autoscaler_events_dedup", "dedup_key", "ts_ms"),
    sa.Index("ix_autoscaler_events_job", "job_key", "id"),
    sa.Index("ix_autoscaler_events_last", "last_ms"),
)

LEASES = sa.Table(
    "autoscaler_leases",
    METADATA,
    sa.Column("name", sa.String(256), primary_key=True),  # a cluster name
    sa.Column("owner", sa.String(256), nullable=False),  # the holding daemon's instance id
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
    sa.Column("acquired_ms", sa.BigInteger, nullable=False),
)

# A job's offered load in time buckets (autoscaler.foresight), for its forecast: one row per chunk of
# CHUNK_BUCKETS buckets, rewritten while a bucket of it closes, so a write is about a kilobyte per job and
# closed bucket, and three weeks of 5-minute buckets are 21 rows. ``scores`` (the forecasts' record) is
# read from the job's newest row.
LOAD_HISTORY = sa.Table(
    "autoscaler_load_history",
    METADATA,
    sa.Column("job_key", KEY, primary_key=True),
    sa.Column("chunk", sa.BigInteger, primary_key=True),  # bucket index // CHUNK_BUCKETS
    sa.Column("bucket_ms", sa.BigInteger, nullable=False),
    sa.Column("first_bucket", sa.BigInteger, nullable=False),  # the index of rates' first bucket
    sa.Column("rates", sa.LargeBinary, nullable=False),  # little-endian float32 per bucket, NaN: a gap
    sa.Column("scores", sa.Text, nullable=True),  # JSON: autoscaler.state.load_history.encode_scores
)
