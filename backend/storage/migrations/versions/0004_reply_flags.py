"""What a reply carries beside its words: whether its request was compacted (`compacted`) and
the model's reasoning (`thinking`). Replies stored before kept a compaction note at the start of
their text; it moves to the flag, so stored text is what the model said.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 14:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# The note Tally used to put in front of a reply answered from a compacted request.
OLD_NOTE = "_(Earlier messages were compacted to fit the model's context window.)_"


def upgrade() -> None:
    with op.batch_alter_table("messages") as table:
        table.add_column(
            sa.Column("compacted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        table.add_column(sa.Column("thinking", sa.Text(), nullable=True))
    messages = sa.table(
        "messages",
        sa.column("id", sa.Integer),
        sa.column("role", sa.String),
        sa.column("content", sa.Text),
        sa.column("compacted", sa.Boolean),
    )
    conn = op.get_bind()
    noted = conn.execute(
        sa.select(messages.c.id, messages.c.content).where(
            messages.c.role == "assistant", messages.c.content.startswith(OLD_NOTE)
        )
    )
    for message_id, content in list(noted):
        rest = content[len(OLD_NOTE) :].lstrip()
        conn.execute(
            messages.update()
            .where(messages.c.id == message_id)
            .values(content=rest or content, compacted=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("messages") as table:
        table.drop_column("thinking")
        table.drop_column("compacted")
