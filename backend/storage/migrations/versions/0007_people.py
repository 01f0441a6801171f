"""One person across channels: `identity_links` (an identity on a channel -> the person it
belongs to), `link_codes` (the one-time codes that link two identities), `memory_moves` (memory
to move into a person's, journaled with the link) and `pending_memory` (lines proposed to a
person, written once confirmed); and `overflow_jobs.origin`, where a summary's turns were said,
which its memory line names.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "identity_links",
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("user_key", sa.String(200), primary_key=True),
        sa.Column("person_id", sa.String(32), nullable=False),
        sa.Column("linked_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_identity_links_person", "identity_links", ["tenant_id", "person_id"])
    op.create_table(
        "link_codes",
        sa.Column("code_hash", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("user_key", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
    )
    with op.batch_alter_table("overflow_jobs") as table:
        table.add_column(sa.Column("origin", sa.String(200)))
    op.create_table(
        "memory_moves",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("from_scope", sa.String(200), nullable=False),
        sa.Column("into_scope", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True)),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "pending_memory",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("user_key", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(36), nullable=False),
        sa.Column("job_id", sa.BigInteger()),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("first_message_id", sa.BigInteger()),
        sa.Column("last_message_id", sa.BigInteger()),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True)),
        sa.Column("written_at", sa.DateTime(timezone=True)),
        sa.Column("announced_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("job_id", name="uq_pending_job"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_pending_memory_user", "pending_memory", ["tenant_id", "user_key", "status"])


def _id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def downgrade() -> None:
    op.drop_index("ix_pending_memory_user", table_name="pending_memory")
    op.drop_table("pending_memory")
    op.drop_table("memory_moves")
    with op.batch_alter_table("overflow_jobs") as table:
        table.drop_column("origin")
    op.drop_table("link_codes")
    op.drop_index("ix_identity_links_person", table_name="identity_links")
    op.drop_table("identity_links")
