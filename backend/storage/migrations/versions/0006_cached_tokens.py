"""Prompt-cache accounting in `usage`: `cached_tokens` (prompt tokens read from the vendor's
prompt cache) and `cache_write_tokens` (written to it, Anthropic's cache creation). Both are
counted in `prompt_tokens` too; days accounted before are 0 (nothing was recorded then).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

COLUMNS = ("cached_tokens", "cache_write_tokens")


def upgrade() -> None:
    with op.batch_alter_table("usage") as table:
        for name in COLUMNS:
            table.add_column(sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("usage") as table:
        for name in reversed(COLUMNS):
            table.drop_column(name)
