"""The collected metric window, so a restarted daemon need not wait a full window before deciding.

Revision ID: 0002
Revises: 0001
Create Date: 2026-07-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SAMPLE_COLUMNS = (
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


def upgrade() -> None:
    op.create_table(
        "autoscaler_metric_window",
        sa.Column("job_key", sa.String(512), primary_key=True),
        sa.Column("ts_ms", sa.BigInteger, primary_key=True),
        sa.Column("vertex", sa.String(128), primary_key=True),
        sa.Column("running_since_ms", sa.BigInteger, nullable=False),
        *(sa.Column(name, sa.Double, nullable=True) for name in SAMPLE_COLUMNS),
    )


def downgrade() -> None:
    op.drop_table("autoscaler_metric_window")
