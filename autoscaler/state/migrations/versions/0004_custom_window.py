"""The custom metrics of the collected window, so a restarted daemon's custom evaluators and
memory-pressure gate resume their windows instead of refilling them.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autoscaler_custom_window",
        sa.Column("job_key", sa.String(512), primary_key=True),
        sa.Column("ts_ms", sa.BigInteger, primary_key=True),
        sa.Column("scope", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("value", sa.Double, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("autoscaler_custom_window")
