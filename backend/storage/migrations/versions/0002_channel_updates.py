"""Chat-channel updates, recorded before they are acknowledged (`channel_updates`).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 23:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "channel_updates",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("bot", sa.String(length=64), nullable=False),
        sa.Column("platform_id", sa.String(length=200), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("chunks_sent", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "bot", "platform_id", name="uq_channel_update"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_channel_updates_open", "channel_updates", ["tenant_id", "bot", "status"])


def downgrade() -> None:
    op.drop_index("ix_channel_updates_open", table_name="channel_updates")
    op.drop_table("channel_updates")
