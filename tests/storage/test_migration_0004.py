"""Migration 0004: a reply stored with the old compaction note at the start of its text keeps
only the model's words, flagged `compacted`; other messages are untouched."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Connection

from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.migrate import alembic_config, migrate

OLD_NOTE = "_(Earlier messages were compacted to fit the model's context window.)_"


async def test_the_old_compaction_note_moves_from_the_text_to_the_flag(database_url: str) -> None:
    database = Database(database_url)
    try:
        async with database.engine.begin() as conn:
            await conn.run_sync(upgrade_to, "0003")
            await conn.execute(
                text(
                    "INSERT INTO sessions (id, tenant_id, channel, title, summary, "
                    "window_start_id, memory_watermark_id, created_at, updated_at) "
                    "VALUES ('s1', 'default', 'web', '', '', 0, 0, :now, :now)"
                ),
                {"now": datetime.now(UTC)},
            )
            for role, content in [
                ("user", f"{OLD_NOTE} is what I read"),  # a user's words are never touched
                ("assistant", f"{OLD_NOTE}\n\nThe answer."),
                ("assistant", "An ordinary answer."),
            ]:
                await conn.execute(
                    text(
                        "INSERT INTO messages (tenant_id, session_id, role, content, turn_id, "
                        "status, created_at) VALUES ('default', 's1', :role, :content, 't', "
                        "'complete', :now)"
                    ),
                    {"role": role, "content": content, "now": datetime.now(UTC)},
                )
        await migrate(database)
        stored = await MessageRepository(database).between(
            tenant_id="default", session_id="s1", first_id=0, last_id=10**9
        )
    finally:
        await database.dispose()
    assert [(m.content, m.compacted) for m in stored] == [
        (f"{OLD_NOTE} is what I read", False),
        ("The answer.", True),
        ("An ordinary answer.", False),
    ]


def upgrade_to(connection: Connection, revision: str) -> None:
    command.upgrade(alembic_config(connection), revision)
