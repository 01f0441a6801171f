"""A failed turn stays failed: its user message keeps the turn's outcome (`failure_code`,
`failure_message`: Tally's own words, naming the provider, its URL and the cause, never the
user's text), so the page, the API and the terminal show it after a reload, and the key to
resume it (`idempotency_key`, set to one of Tally's when the client sent none). Turns that
failed before have none: they show as before, the user's message alone.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as table:
        table.add_column(sa.Column("failure_code", sa.String(64), nullable=True))
        table.add_column(sa.Column("failure_message", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as table:
        table.drop_column("failure_message")
        table.drop_column("failure_code")
