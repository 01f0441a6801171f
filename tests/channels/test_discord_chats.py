"""Who a Discord bot answers (allow_from, servers' channels by mention or all), its commands and
their buttons (answered only for the person they were for), pictures, and memory for its chats."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from backend.storage.tables import channel_updates
from tests.channels.discord_fixtures import (
    BOT_ID,
    DM,
    GUILD,
    GUILD_CHANNEL,
    ServedDiscord,
    discord_settings,
    mention,
    serving_discord,
)
from tests.fakes.discord_server import FakeDiscordServer, Sent
from tests.waiting import until

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def ask(served: ServedDiscord, text: str, count: int, **fields: Any) -> Sent:
    await served.deliver(served.message(text, **fields))
    return (await served.sent(count, channel_id=fields.get("channel_id", DM)))[-1]


async def test_allow_from_names_who_may_talk_to_the_bot(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    bot = discord_settings(discord_fake, allow_from=["501"])
    async with serving_discord(discord_fake, tmp_path, database_url, bot=bot) as served:
        await served.deliver(served.message("stranger", author_id="666", channel_id="301"))
        allowed = await ask(served, "hello", 1)
        await served.settle()
    assert allowed.content == "Hello from Tally."
    assert discord_fake.sent("301") == []  # the stranger was ignored, not answered


async def test_an_empty_allow_from_lets_nobody_in(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    bot = discord_settings(discord_fake, allow_from=[])
    async with serving_discord(discord_fake, tmp_path, database_url, bot=bot) as served:
        await served.deliver(served.message("let me in"))
        await served.deliver(served.message("/help"))
        await until_kept(served, 2)
        await served.settle()
        stored = await served.stored()
    assert discord_fake.sent() == [] and stored == []


async def test_in_a_server_the_bot_answers_when_mentioned(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    where = {"channel_id": GUILD_CHANNEL, "guild_id": GUILD}
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        await served.deliver(served.message("just chatting", **where))
        answered = await ask(served, f"<@{BOT_ID}> what is up?", 1, mentions=[mention()], **where)
        await served.settle()
        stored = await served.stored(GUILD_CHANNEL)
    assert answered.content == "Hello from Tally."
    assert stored == [("user", "what is up?"), ("assistant", "Hello from Tally.")]


async def test_group_policy_all_answers_every_message(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    bot = discord_settings(discord_fake, group_policy="all")
    async with serving_discord(discord_fake, tmp_path, database_url, bot=bot) as served:
        said = await ask(served, "anyone?", 1, channel_id=GUILD_CHANNEL, guild_id=GUILD)
    assert said.content == "Hello from Tally."


async def test_its_own_and_other_bots_messages_are_never_answered(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        await served.deliver(served.message("I am a bot", bot=True))
        await served.deliver(served.message("my own words", author_id=BOT_ID))
        said = await ask(served, "and a person", 1)
        await served.settle()
    assert said.content == "Hello from Tally." and len(discord_fake.sent()) == 1


async def test_summary_memory_and_forget_with_buttons_only_for_their_person(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        no_summary = await ask(served, "/summary", 1)
        no_memory = await ask(served, "/memory", 2)
        store = served.app.state.services.memory
        fact = NewEntry(source="manual", content="Ada keeps bees")
        await store.append(tenant_id="default", scope_key="", entries=[fact])
        remembered = await ask(served, "/memory", 3)
        choose = await ask(served, "/forget", 4)
        button = choose.components[0]["components"][0]
        press = discord_fake.press(button["custom_id"], user_id="999", message_text=choose.content)
        await served.deliver(press, "INTERACTION_CREATE")  # someone else's press
        await until_callbacks(served, 1)
        kept = await store.read(tenant_id="default", scope_key="")
        press = discord_fake.press(button["custom_id"], message_text=choose.content)
        await served.deliver(press, "INTERACTION_CREATE")
        await until_callbacks(served, 2)
        left = await store.read(tenant_id="default", scope_key="")
    not_yours, forgotten = discord_fake.callbacks()
    assert "No summary yet" in no_summary.content and "nothing" in no_memory.content
    assert "Ada keeps bees" in remembered.content
    assert "Which one" in choose.content and button["custom_id"].startswith("501:")
    assert (not_yours.type, not_yours.data["flags"]) == (4, 64)  # to the presser only
    assert "<@501>" in not_yours.data["content"] and len(kept.entries) == 1
    assert forgotten.type == 7 and forgotten.data["components"] == []  # the message edited
    assert "Forgotten" in forgotten.data["content"] and left.entries == ()


async def test_a_picture_becomes_an_image_part_of_the_message(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    discord_fake.files["cat.png"] = PNG
    provider = ScriptedProvider(replies=["A nice picture."])
    async with serving_discord(discord_fake, tmp_path, database_url, provider=provider) as served:
        attachments = [discord_fake.attachment("cat.png")]
        said = await ask(served, "look", 1, attachments=attachments)
        (request,) = provider.requests
    (image,) = request.messages[-1].images
    assert said.content == "A nice picture."
    assert image.media_type == "image/png" and base64.b64decode(image.data) == PNG


async def test_a_picture_discord_cannot_hand_over_is_said_and_nothing_is_stored(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["I see nothing."])
    async with serving_discord(discord_fake, tmp_path, database_url, provider=provider) as served:
        attachments = [discord_fake.attachment("gone.png")]  # not in discord_fake.files
        said = await ask(served, "look", 1, attachments=attachments)
        stored = await served.stored()
    assert "could not fetch that picture" in said.content
    assert stored == [] and provider.requests == []


async def test_a_fact_the_model_remembers_is_marked_with_its_chat(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada keeps bees"})
    provider = ScriptedProvider(replies=[])
    provider.push(ScriptedToolCalls([remember]), "Noted.")
    async with serving_discord(discord_fake, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "remember: I keep bees", 1)
        memory = await served.app.state.services.memory.read(tenant_id="default", scope_key="")
    assert said.content == "Noted."
    (entry,) = [e for e in memory.entries if "bees" in e.content]
    assert entry.source == "discord:dc:300"  # memory lines name the bot and the chat


async def until_kept(served: ServedDiscord, count: int) -> bool:
    async def kept() -> bool:
        async with served.app.state.services.database.read() as conn:
            query = select(func.count()).select_from(channel_updates)
            return int((await conn.execute(query)).scalar_one()) >= count

    return await until(kept, f"{count} updates kept")


async def until_callbacks(served: ServedDiscord, count: int) -> None:
    await asyncio.to_thread(
        served.fake.wait_until,
        lambda: len(served.fake.callbacks()) >= count,
        what=f"{count} interaction callbacks",
    )


async def test_new_starts_a_fresh_session_and_keeps_the_old_one(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        await ask(served, "first conversation", 1)
        first = await served.stored()
        new = await ask(served, "/new", 2)
        await ask(served, "second conversation", 3)
        second = await served.stored()
        listed, total = await served.app.state.services.sessions.list(tenant_id="default")
    assert "new conversation" in new.content
    assert [t for r, t in first if r == "user"] == ["first conversation"]
    assert [t for r, t in second if r == "user"] == ["second conversation"]
    assert total == 2 and {s.channel for s in listed} == {"discord"}


async def test_stop_cancels_the_reply_being_written(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(delay_s=0.05)
    provider.push("word " * 2000)
    async with serving_discord(discord_fake, tmp_path, database_url, provider=provider) as served:
        await served.deliver(served.message("write a lot"))
        await asyncio.to_thread(
            discord_fake.wait_until, lambda: DM in discord_fake.typing, what="typing…"
        )
        stopped = await ask(served, "/stop", 1)
        sent = await served.sent(2)
        stored = await served.stored()
    assert stopped.content == "Stopped."
    assert sent[1].content == "Stopped."  # the turn's own notice
    assert stored[0] == ("user", "write a lot")
    assert all(role == "user" or len(text) < 10_000 for role, text in stored)


async def test_in_a_server_the_forget_buttons_answer_the_member_who_asked(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    where = {"channel_id": GUILD_CHANNEL, "guild_id": GUILD}
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        store = served.app.state.services.memory
        fact = NewEntry(source="manual", content="the team meets on Mondays")
        await store.append(tenant_id="default", scope_key="", entries=[fact])
        choose = await ask(served, f"<@{BOT_ID}> /forget", 1, mentions=[mention()], **where)
        button = choose.components[0]["components"][0]
        press = discord_fake.press(button["custom_id"], message_text=choose.content, **where)
        await served.deliver(press, "INTERACTION_CREATE")  # from the member who asked
        await until_callbacks(served, 1)
        left = await store.read(tenant_id="default", scope_key="")
    (forgotten,) = discord_fake.callbacks()
    assert "member" in press and "user" not in press  # a server's press names a member
    assert forgotten.type == 7 and "Forgotten" in forgotten.data["content"]
    assert left.entries == ()
