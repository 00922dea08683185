"""The jobs' offered load in time buckets, the history a forecast reads (issue 38).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autoscaler_load_history",
        sa.Column("job_key", sa.String(512), primary_key=True),
        sa.Column("chunk", sa.BigInteger, primary_key=True),
        sa.Column("bucket_ms", sa.BigInteger, nullable=False),
        sa.Column("first_bucket", sa.BigInteger, nullable=False),
        sa.Column("rates", sa.LargeBinary, nullable=False),
        sa.Column("scores", sa.Text, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("autoscaler_load_history")
