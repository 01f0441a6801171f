"""A Discord bot end to end: the real discord.py against a fake Discord (REST and gateway);
turns stored exactly as a web turn's; every message answered once, across a dropped and resumed
gateway connection too; Discord has no webhook for a bot's messages."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import select

from backend.channels.discord.format import MAX_CHARS, discord_chunks
from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import channel_updates
from tests.channels.discord_fixtures import (
    DISCORD_TOKEN,
    ServedDiscord,
    serving_discord,
)
from tests.fakes.discord_server import FakeDiscordServer


async def test_gateway_a_message_in_a_reply_out_stored_as_a_web_turn(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        message = served.message("Hi there!")
        await served.deliver(message)
        (reply,) = await served.sent(1)
        await served.settle()
        stored = await served.stored()
        kept = await kept_rows(served)
    (identify,) = discord_fake.identifies
    assert identify["token"] == DISCORD_TOKEN
    assert identify["intents"] & (1 << 15)  # the message content intent
    assert reply.content == "Hello from Tally."
    assert reply.reference is not None and str(reply.reference["message_id"]) == message["id"]
    assert reply.allowed_mentions == {"parse": []}  # a model's words ping nobody
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]
    assert kept == [(message["id"], "answered")]


async def test_a_message_dispatched_twice_is_answered_once(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        message = served.message("once please")
        await served.deliver(message)
        await served.deliver(message)  # the same message id again
        await served.sent(1)
        await served.deliver(served.message("and then this"))
        await served.sent(2)
        await served.settle()
        stored = await served.stored()
    assert [text for role, text in stored if role == "user"] == ["once please", "and then this"]
    assert len(discord_fake.sent()) == 2


async def test_a_dropped_gateway_resumes_and_loses_no_message(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["one", "two", "three"])
    async with serving_discord(discord_fake, tmp_path, database_url, provider=provider) as served:
        await served.deliver(served.message("first"))
        await served.sent(1)
        discord_fake.drop(DISCORD_TOKEN)
        await served.deliver(served.message("while away"))  # replayed on RESUME
        await served.sent(2)
        discord_fake.send_op(DISCORD_TOKEN, 7)  # RECONNECT: resumed again
        await served.deliver(served.message("after reconnect"))
        await served.sent(3)
        stored = await served.stored()
    assert len(discord_fake.identifies) == 1 and len(discord_fake.resumes) >= 2
    assert [text for role, text in stored if role == "user"] == [
        "first",
        "while away",
        "after reconnect",
    ]
    assert [s.content for s in discord_fake.sent()] == ["one", "two", "three"]


async def test_a_long_reply_arrives_as_ordered_replies_within_the_limit(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    long_reply = "\n\n".join(
        f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(170)) for p in range(10)
    )
    assert len(long_reply) > 10_000
    provider = ScriptedProvider(replies=[long_reply])
    async with serving_discord(discord_fake, tmp_path, database_url, provider=provider) as served:
        message = served.message("tell me everything")
        await served.deliver(message)
        chunks = discord_chunks(long_reply)
        sent = await served.sent(len(chunks))
    assert len(chunks) >= 5
    assert [s.content for s in sent] == chunks
    assert all(len(s.content) <= MAX_CHARS for s in sent)
    assert " ".join(s.content for s in sent).split() == long_reply.split()
    assert {str(s.reference["message_id"]) for s in sent if s.reference} == {message["id"]}


async def test_rate_limits_are_waited_out(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        discord_fake.rate_limit_next(0.2)
        discord_fake.rate_limit_next(0.2, is_global=True)
        await served.deliver(served.message("busy?"))
        (reply,) = await served.sent(1)
    assert reply.content == "Hello from Tally."
    assert discord_fake.send_attempts == 3  # two 429s, then the message, once


async def test_discord_has_no_webhook_for_a_bots_messages(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        forged = await served.client.post(
            "/channels/default/dc", json={"t": "MESSAGE_CREATE", "d": served.message("forged")}
        )
        await served.settle()
        rows = await kept_rows(served)
    assert forged.status_code == 404
    assert rows == [] and discord_fake.sent() == []


async def kept_rows(served: ServedDiscord) -> list[tuple[str, str]]:
    async with served.app.state.services.database.read() as connection:
        rows = await connection.execute(
            select(channel_updates.c.platform_id, channel_updates.c.status).order_by(
                channel_updates.c.id
            )
        )
        return [(r.platform_id, r.status) for r in rows]


async def test_heartbeats_are_sent_and_acknowledged(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url):
        await asyncio.to_thread(
            discord_fake.wait_until, lambda: discord_fake.heartbeats >= 1, what="a heartbeat"
        )
        discord_fake.send_op(DISCORD_TOKEN, 1)  # Discord asks for one now
        await asyncio.to_thread(
            discord_fake.wait_until, lambda: discord_fake.heartbeats >= 2, what="another"
        )


@pytest.mark.slow
async def test_an_invalidated_session_identifies_again_and_answers(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    """INVALID_SESSION (op 9, not resumable): a new session (discord.py waits 5 s before an
    IDENTIFY that is not the first, as Discord limits them)."""
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        discord_fake.send_op(DISCORD_TOKEN, 9, False)
        await asyncio.to_thread(discord_fake.wait_connected, DISCORD_TOKEN, 2)
        await served.deliver(served.message("still there?"))
        (reply,) = await served.sent(1)
    assert len(discord_fake.identifies) == 2 and discord_fake.resumes == []
    assert reply.content == "Hello from Tally."
