"""Who a Telegram bot answers (allow_from, groups), its commands, photos, and memory for its
chats."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.conftest import TOKEN, Served, bot_settings, serving_bot
from tests.fakes.summarizer import EchoSummarizer
from tests.fakes.telegram_server import FakeTelegramServer, Sent

JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 32


async def ask(served: Served, text: str, count: int, **fields: object) -> str:
    served.telegram.push_update(TOKEN, served.telegram.user_message(text, **fields))  # type: ignore[arg-type]
    chat_id = int(fields.get("chat_id", 42))  # type: ignore[call-overload]
    return (await served.sent(count, chat_id=chat_id))[-1].text


async def test_allow_from_names_who_may_talk_to_the_bot(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    bot = bot_settings(telegram, allow_from=["@ada", "1001"])
    async with serving_bot(telegram, tmp_path, database_url, bot=bot) as served:
        telegram.push_update(TOKEN, telegram.user_message("stranger", user_id=7, username="eve"))
        by_id = await ask(served, "by id", 1, user_id=1001, username="", chat_id=1001)
        by_name = await ask(served, "by name", 1)
    assert by_id == by_name == "Hello from Tally."
    assert telegram.sent(7) == []  # eve's message was ignored, not answered


async def test_an_empty_allow_from_lets_nobody_in(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    bot = bot_settings(telegram, allow_from=[])
    async with serving_bot(telegram, tmp_path, database_url, bot=bot) as served:
        telegram.push_update(TOKEN, telegram.user_message("let me in"))
        telegram.push_update(TOKEN, telegram.user_message("/help"))
        await served.until(lambda t: t.bots[TOKEN].updates == [], "both updates fetched")
        await served.app.state.channels.get("default", "tg").settle()
        stored = await served.stored()
    assert telegram.sent(42, "sendMessage") == [] and stored == []


async def test_in_a_group_the_bot_answers_when_mentioned_or_replied_to(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    group = {"chat_id": -500, "chat_type": "supergroup"}
    async with serving_bot(telegram, tmp_path, database_url) as served:
        telegram.push_update(TOKEN, telegram.user_message("just chatting", **group))  # type: ignore[arg-type]
        mention = "@tally_test_bot what is up?"
        entities = [{"type": "mention", "offset": 0, "length": len("@tally_test_bot")}]
        answered = await ask(served, mention, 1, entities=entities, **group)
        bot_message = {
            "message_id": 1,
            "date": 0,
            "chat": {"id": -500, "type": "supergroup"},
            "from": {"id": telegram.bots[TOKEN].id, "is_bot": True, "first_name": "T"},
            "text": "Hello from Tally.",
        }
        replied = await ask(served, "and you?", 2, reply_to=bot_message, **group)
        sessions = served.app.state.services.sessions
        session = await sessions.find(
            tenant_id="default", channel="telegram", external_key="tg:-500"
        )
        assert session is not None
        stored = await served.app.state.services.messages.window(
            tenant_id="default", session_id=session.id, start_id=0, limit=50
        )
    assert answered == replied == "Hello from Tally."
    assert [m.content for m in stored if m.role == "user"] == [" what is up?".strip(), "and you?"]


async def test_group_policy_all_answers_every_message(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    bot = bot_settings(telegram, group_policy="all")
    async with serving_bot(telegram, tmp_path, database_url, bot=bot) as served:
        said = await ask(served, "anyone?", 1, chat_id=-7, chat_type="group")
    assert said == "Hello from Tally."


async def test_new_starts_a_fresh_session_and_keeps_the_old_one(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_bot(telegram, tmp_path, database_url) as served:
        await ask(served, "first conversation", 1)
        first = await served.stored()
        new = await ask(served, "/new", 2)
        await ask(served, "second conversation", 3)
        second = await served.stored()
        listed, total = await served.app.state.services.sessions.list(tenant_id="default")
    assert "new conversation" in new
    assert [t for r, t in first if r == "user"] == ["first conversation"]
    assert [t for r, t in second if r == "user"] == ["second conversation"]
    assert total == 2 and {s.channel for s in listed} == {"telegram"}


async def test_new_distills_what_the_conversation_left_said_into_memory(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_bot(telegram, tmp_path, database_url, summarizer=EchoSummarizer()) as served:
        await ask(served, "my cat is called Biscuit", 1)
        await ask(served, "/new", 2)
        await served.app.state.services.runtimes.wait_idle()
        memory = await served.app.state.services.memory.read(tenant_id="default", scope_key="")
    (line,) = memory.entries
    assert line.content == "user said: my cat is called Biscuit"
    assert line.origin == "telegram:tg:42"  # where it was said, though the chat moved on


async def test_stop_cancels_the_reply_being_written(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(delay_s=0.05)
    provider.push("word " * 2000)
    async with serving_bot(telegram, tmp_path, database_url, provider=provider) as served:
        telegram.push_update(TOKEN, telegram.user_message("write a lot"))
        await served.until(lambda t: bool(t.sent(42, "sendChatAction")), "typing")
        stopped = await ask(served, "/stop", 1)
        await served.sent(2)
        stored = await served.stored()
    assert stopped == "Stopped."
    assert telegram.sent(42, "sendMessage")[1].text == "Stopped."  # the turn's own notice
    assert stored[0] == ("user", "write a lot")
    assert all(role == "user" or len(text) < 10_000 for role, text in stored)


async def test_summary_memory_and_forget(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_bot(telegram, tmp_path, database_url) as served:
        no_summary = await ask(served, "/summary", 1)
        no_memory = await ask(served, "/memory", 2)
        store = served.app.state.services.memory
        fact = NewEntry(source="manual", content="Ada keeps bees")
        await store.append(tenant_id="default", scope_key="", entries=[fact])
        remembered = await ask(served, "/memory", 3)
        choose = await ask(served, "/forget", 4)
        question = telegram.sent(42, "sendMessage")[-1]
        telegram.push_update(TOKEN, telegram.button_press(question, _button_data(question)))
        await served.until(lambda t: bool(t.sent(0, "answerCallbackQuery")), "the button answer")
        left = await store.read(tenant_id="default", scope_key="")
    assert "No summary yet" in no_summary and "nothing" in no_memory
    assert "Ada keeps bees" in remembered
    assert "Which one" in choose
    assert left.entries == ()


def _button_data(message: Sent) -> str:
    markup = message.params["reply_markup"]
    parsed = json.loads(markup) if isinstance(markup, str) else markup
    return str(parsed["inline_keyboard"][0][0]["callback_data"])


async def test_a_photo_becomes_an_image_part_of_the_message(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    telegram.files["photo-1"] = JPEG
    provider = ScriptedProvider(replies=["A nice picture."])
    async with serving_bot(telegram, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "look", 1, photo_file_id="photo-1")
        (request,) = provider.requests
    (image,) = request.messages[-1].images
    assert said == "A nice picture."
    assert image.media_type == "image/jpeg" and base64.b64decode(image.data) == JPEG


async def test_a_photo_telegram_cannot_hand_over_is_said_and_nothing_is_stored(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["I see nothing."])
    async with serving_bot(telegram, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "look", 1, photo_file_id="gone")  # not in telegram.files
        stored = await served.stored()
    assert "could not fetch that photo" in said and "photo_unavailable" in said
    assert stored == [] and provider.requests == []


async def test_overflow_summaries_and_memory_work_for_a_telegram_chat(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_bot(
        telegram,
        tmp_path,
        database_url,
        summarizer=EchoSummarizer(),
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2},
    ) as served:
        said = ["My name is Ada.", "I live in Lisbon.", "ok", "and?"]
        for count, text in enumerate(said, start=1):
            await ask(served, text, count)
            await served.app.state.services.runtimes.wait_idle()
        memory = await served.app.state.services.memory.read(tenant_id="default", scope_key="")
        session = await served.app.state.services.sessions.find(
            tenant_id="default", channel="telegram", external_key="tg:42"
        )
    assert session is not None and session.window_start_id > 0  # turns left the window
    (entry,) = [e for e in memory.entries if "Ada" in e.content]
    assert entry.provenance is not None and entry.provenance.session_id == session.id
    assert (entry.writer, entry.origin) == ("auto-overflow", "telegram:tg:42")  # where it was said


async def test_a_fact_the_model_remembers_is_marked_with_its_chat(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada keeps bees"})
    provider = ScriptedProvider(replies=[])
    provider.push(ScriptedToolCalls([remember]), "Noted.")
    async with serving_bot(telegram, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "remember: I keep bees", 1)
        memory = await served.client.get("/api/memory")
        stored = await served.stored()
        session = await served.app.state.services.sessions.find(
            tenant_id="default", channel="telegram", external_key="tg:42"
        )
        assert session is not None
        tools = await served.client.get(f"/api/chat/sessions/{session.id}/tool-conversations")
    (entry,) = memory.json()["entries"]
    assert said == "Noted."
    # Stored as a web turn is: the user's message and the final reply; the call apart.
    assert stored == [("user", "remember: I keep bees"), ("assistant", "Noted.")]
    (call,) = tools.json()["tool_conversations"]
    assert call["tool_name"] == "memory_write"
    assert (entry["source"], entry["content"]) == ("telegram:tg:42", "Ada keeps bees")
