"""Memory ranked by meaning: `memory_vectors`, the embedding of each fact and message, stored
once per embedding model (a message's vector goes with the message).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "memory_vectors",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("scope_key", sa.String(200), nullable=False, server_default=""),
        sa.Column("model", sa.String(120), nullable=False),
        sa.Column("item", sa.String(80), nullable=False),
        sa.Column(
            "message_id", Id, sa.ForeignKey("messages.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint(
            "tenant_id", "model", "scope_key", "item", name="uq_memory_vectors_item"
        ),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_memory_vectors_message", "memory_vectors", ["message_id"])


def downgrade() -> None:
    op.drop_index("ix_memory_vectors_message", table_name="memory_vectors")
    op.drop_table("memory_vectors")
