"""A lease on each chat-channel update in hand (`channel_updates.leased_until`), so that with
several processes an update is answered by one, and a dead process's are taken over.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 08:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("channel_updates") as table:
        table.add_column(sa.Column("leased_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("channel_updates") as table:
        table.drop_column("leased_until")
