"""Job state, scaling history and events.

Revision ID: 0001
Revises:
Create Date: 2026-07-30

The tables are spelled out here rather than imported from ``autoscaler.state.tables``: a revision must
keep creating the schema of its own time, whatever the code looks like later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

KEY = sa.String(512)


def upgrade() -> None:
    op.create_table(
        "autoscaler_job_state",
        sa.Column("job_key", KEY, primary_key=True),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("history_digest", sa.String(64), nullable=False),
        sa.Column("last_rescale_ms", sa.BigInteger, nullable=True),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "autoscaler_scaling_history",
        sa.Column("job_key", KEY, primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("ts_ms", sa.BigInteger, nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
    )
    op.create_table(
        "autoscaler_events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("job_key", KEY, nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("message_key", sa.String(512), nullable=False),
        sa.Column("dedup_key", sa.String(64), nullable=False),
        sa.Column("ts_ms", sa.BigInteger, nullable=False),
        sa.Column("last_ms", sa.BigInteger, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
    )
    op.create_index("ix_autoscaler_events_dedup", "autoscaler_events", ["dedup_key", "ts_ms"])
    op.create_index("ix_autoscaler_events_job", "autoscaler_events", ["job_key", "id"])
    op.create_index("ix_autoscaler_events_last", "autoscaler_events", ["last_ms"])


def downgrade() -> None:
    op.drop_table("autoscaler_events")
    op.drop_table("autoscaler_scaling_history")
    op.drop_table("autoscaler_job_state")
