"""The operator's console: estimated cost and summarizer calls in `usage` (days accounted
before are 0: nothing was recorded then), and `admin_operations`, long administrative
operations (re-summarize a tenant's memory, export it) with their progress.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

USAGE_COLUMNS = (
    ("summarizer_calls", sa.Integer()),
    ("cost_micros", sa.BigInteger()),
    ("unpriced_calls", sa.Integer()),
)


def upgrade() -> None:
    with op.batch_alter_table("usage") as table:
        for name, kind in USAGE_COLUMNS:
            table.add_column(sa.Column(name, kind, nullable=False, server_default="0"))
    op.create_table(
        "admin_operations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_admin_operations_tenant", "admin_operations", ["tenant_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_admin_operations_tenant", table_name="admin_operations")
    op.drop_table("admin_operations")
    with op.batch_alter_table("usage") as table:
        for name, _ in reversed(USAGE_COLUMNS):
            table.drop_column(name)
