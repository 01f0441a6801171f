"""Storage on SQLite and PostgreSQL through the same code: migrations, sessions, messages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import select, text

from backend.domain.events import ToolCallRecord
from backend.domain.messages import ImagePart, UserInput
from backend.errors import SessionNotFound
from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.migrate import alembic_config, migrate
from backend.storage.sessions import SessionRepository
from backend.storage.tables import tenants
from backend.storage.tool_conversations import ToolConversationRepository


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(database_url)
    await migrate(db)
    yield db
    await db.dispose()


async def test_migrations_are_idempotent_and_create_the_default_tenant(
    database: Database,
) -> None:
    await migrate(database)  # a second start changes nothing
    async with database.read() as conn:
        rows = (await conn.execute(select(tenants.c.id))).scalars().all()
        revision = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    assert rows == ["default"]
    assert revision == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_processes_starting_together_on_an_empty_database_migrate_it_once(
    postgres: str,
) -> None:
    workers = [Database(postgres) for _ in range(4)]  # an engine (a process) each
    try:
        # Without the migration lock they deadlock on each other's DDL: fail, do not hang.
        await asyncio.wait_for(asyncio.gather(*(migrate(w) for w in workers)), timeout=120)
        async with workers[0].read() as conn:
            versions = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
            rows = (await conn.execute(select(tenants.c.id))).scalars().all()
    finally:
        await asyncio.gather(*(worker.dispose() for worker in workers))
    assert len(versions) == 1 and rows == ["default"]


async def test_session_lifecycle_is_scoped_by_tenant(database: Database) -> None:
    sessions = SessionRepository(database)
    created = await sessions.create(tenant_id="default", channel="web", title="Plans")
    assert (await sessions.get(tenant_id="default", session_id=created.id)).title == "Plans"
    with pytest.raises(SessionNotFound):
        await sessions.get(tenant_id="other", session_id=created.id)
    with pytest.raises(SessionNotFound):
        await sessions.update(tenant_id="other", session_id=created.id, title="stolen")
    with pytest.raises(SessionNotFound):
        await sessions.delete(tenant_id="other", session_id=created.id)
    renamed = await sessions.update(tenant_id="default", session_id=created.id, title="Trip")
    assert renamed.title == "Trip"
    listed, total = await sessions.list(tenant_id="default", query="tri")
    assert total == 1 and listed[0].id == created.id
    assert (await sessions.list(tenant_id="other"))[1] == 0
    await sessions.delete(tenant_id="default", session_id=created.id)
    with pytest.raises(SessionNotFound):
        await sessions.get(tenant_id="default", session_id=created.id)


async def test_title_search_treats_wildcards_literally(database: Database) -> None:
    sessions = SessionRepository(database)
    await sessions.create(tenant_id="default", channel="api", title="100% done")
    await sessions.create(tenant_id="default", channel="api", title="1000 done")
    listed, total = await sessions.list(tenant_id="default", query="100%")
    assert total == 1 and listed[0].title == "100% done"


async def test_window_reads_the_newest_messages_oldest_first(database: Database) -> None:
    session = await SessionRepository(database).create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    for i in range(6):
        await messages.add_user(
            tenant_id="default",
            session_id=session.id,
            turn_id=f"t{i}",
            user_input=UserInput(f"m{i}"),
        )
    window = await messages.window(tenant_id="default", session_id=session.id, start_id=0, limit=3)
    assert [m.content for m in window] == ["m3", "m4", "m5"]
    everything = await messages.window(
        tenant_id="default", session_id=session.id, start_id=window[1].id, limit=None
    )
    assert [m.content for m in everything] == ["m4", "m5"]
    other = await messages.window(tenant_id="other", session_id=session.id, start_id=0, limit=None)
    assert other == []


async def test_a_windows_shape_is_its_messages_without_their_text(database: Database) -> None:
    """What the overflow planner reads: ids, roles, token counts and lengths in characters
    (not bytes), of the window only, oldest first."""
    sessions = SessionRepository(database)
    session = await sessions.create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    said = ["evicted", "我叫小明 🙂", "naïve"]
    for i, words in enumerate(said):
        await messages.add_user(
            tenant_id="default",
            session_id=session.id,
            turn_id=f"t{i}",
            user_input=UserInput(words),
            token_count=i or None,
        )
        await messages.add_reply(
            tenant_id="default",
            session_id=session.id,
            turn_id=f"t{i}",
            content="",
            status="complete",
        )
    stored = await messages.window(
        tenant_id="default", session_id=session.id, start_id=0, limit=None
    )
    await sessions.update(tenant_id="default", session_id=session.id, window_start_id=stored[2].id)

    read, shape = await messages.session_with_shape(tenant_id="default", session_id=session.id)

    assert read.window_start_id == stored[2].id
    assert [(row.id, row.role, row.token_count, row.chars) for row in shape] == [
        (m.id, m.role, m.token_count, len(m.content)) for m in stored[2:]
    ]
    assert [row.chars for row in shape if row.role == "user"] == [6, 5]  # UTF-8: 17 and 6 bytes
    with pytest.raises(SessionNotFound):
        await messages.session_with_shape(tenant_id="other", session_id=session.id)


async def test_first_message_titles_an_untitled_session(database: Database) -> None:
    sessions = SessionRepository(database)
    session = await sessions.create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    await messages.add_user(
        tenant_id="default",
        session_id=session.id,
        turn_id="t1",
        user_input=UserInput("Plan a   trip\nto Kyoto " + "x" * 100),
    )
    await messages.add_user(
        tenant_id="default", session_id=session.id, turn_id="t2", user_input=UserInput("later")
    )
    title = (await sessions.get(tenant_id="default", session_id=session.id)).title
    assert title.startswith("Plan a trip to Kyoto") and len(title) == 60


async def test_images_round_trip_in_parts(database: Database) -> None:
    session = await SessionRepository(database).create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    image = ImagePart(media_type="image/png", data="aGVsbG8=")
    await messages.add_user(
        tenant_id="default",
        session_id=session.id,
        turn_id="t1",
        user_input=UserInput("look", images=(image,)),
    )
    (stored,) = await messages.window(
        tenant_id="default", session_id=session.id, start_id=0, limit=None
    )
    assert stored.images == (image,)


async def test_a_text_message_stores_no_parts_and_one_stored_as_json_null_still_reads(
    database: Database,
) -> None:
    """Text-only messages keep SQL NULL (nothing to decode when the window is read); earlier
    versions stored JSON's `null`, and those rows read the same."""
    session = await SessionRepository(database).create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    for text_ in ("new", "old"):
        await messages.add_user(
            tenant_id="default", session_id=session.id, turn_id=text_, user_input=UserInput(text_)
        )
    async with database.write() as conn:
        await conn.execute(text("UPDATE messages SET parts = 'null' WHERE content = 'old'"))
    async with database.read() as conn:
        stored = (await conn.execute(text("SELECT content, parts IS NULL FROM messages"))).all()
    window = await messages.window(
        tenant_id="default", session_id=session.id, start_id=0, limit=None
    )

    assert sorted((content, bool(is_null)) for content, is_null in stored) == [
        ("new", True),
        ("old", False),
    ]
    assert [(m.content, m.images) for m in window] == [("new", ()), ("old", ())]


async def test_reply_links_the_turns_tool_conversations(database: Database) -> None:
    session = await SessionRepository(database).create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    tools = ToolConversationRepository(database)
    record = ToolCallRecord("c1", "now", {"timezone": "UTC"}, "2026-01-01T00:00:00+00:00", False, 3)
    await tools.add(
        tenant_id="default", session_id=session.id, turn_id="t1", record=record, user_message="hi"
    )
    reply = await messages.add_reply(
        tenant_id="default", session_id=session.id, turn_id="t1", content="done", status="complete"
    )
    (row,) = await tools.list(tenant_id="default", session_id=session.id)
    assert row.message_id == reply.id
    assert row.arguments == {"timezone": "UTC"}
    assert await tools.list(tenant_id="other", session_id=session.id) == []


async def test_deleting_a_session_deletes_its_messages_and_tool_calls(database: Database) -> None:
    sessions = SessionRepository(database)
    session = await sessions.create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    await messages.add_user(
        tenant_id="default", session_id=session.id, turn_id="t1", user_input=UserInput("hi")
    )
    record = ToolCallRecord("c1", "now", {}, "x", False, 1)
    await ToolConversationRepository(database).add(
        tenant_id="default", session_id=session.id, turn_id="t1", record=record, user_message="hi"
    )
    await sessions.delete(tenant_id="default", session_id=session.id)
    async with database.read() as conn:
        counts = [
            (await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar()
            for table in ("messages", "tool_conversations")
        ]
    assert counts == [0, 0]


async def test_fifty_concurrent_writes_lose_nothing(database: Database) -> None:
    session = await SessionRepository(database).create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    await asyncio.gather(
        *[
            messages.add_user(
                tenant_id="default",
                session_id=session.id,
                turn_id=f"t{i}",
                user_input=UserInput(f"m{i}"),
            )
            for i in range(50)
        ]
    )
    stored = await messages.window(
        tenant_id="default", session_id=session.id, start_id=0, limit=None
    )
    assert sorted(m.content for m in stored) == sorted(f"m{i}" for i in range(50))
    ids = [m.id for m in stored]
    assert ids == sorted(ids) and len(set(ids)) == 50
