"""The memory entries a summarizer's new line replaces (`overflow_jobs.memory_supersedes`, ids
separated by commas), saved with its summary so a resumed job writes the same line.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 14:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("overflow_jobs") as table:
        table.add_column(sa.Column("memory_supersedes", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("overflow_jobs") as table:
        table.drop_column("memory_supersedes")
