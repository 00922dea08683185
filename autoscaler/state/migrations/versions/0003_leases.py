"""Leases: one daemon acts on a cluster at a time, the others stand by.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autoscaler_leases",
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
        sa.Column("acquired_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("autoscaler_leases")
