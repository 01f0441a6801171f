"""Who a Feishu bot answers (allow_from, groups by @mention or all), its commands and their
cards, pictures, and the memory of its chats."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.feishu_fixtures import ServedFeishu, feishu_settings, serving_feishu
from tests.fakes.feishu_server import FakeFeishuServer, Sent

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
GROUP = {"chat_id": "oc_group_1", "chat_type": "group"}


async def ask(served: ServedFeishu, text: str, count: int, **fields: Any) -> Sent:
    """Send `text` and wait for the `count`-th reply the bot sent."""
    await served.push(served.message(text, **fields))
    return (await served.sent(count))[-1]


async def test_allow_from_names_open_ids_or_user_ids(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    bot = feishu_settings(feishu, allow_from=["ou_ada", "u_bob"])
    async with serving_feishu(feishu, tmp_path, database_url, bot=bot) as served:
        stranger = served.message("let me in", sender="ou_eve", user_id="u_eve")
        await served.acked(await served.push(stranger))
        by_open_id = await ask(served, "by open id", 1)
        by_user_id = await ask(served, "by user id", 2, sender="ou_bob", user_id="u_bob")
        await served.settle()
    assert by_open_id.text == by_user_id.text == "Hello from Tally."
    assert len(feishu.sent()) == 2  # eve's message was kept and ignored, not answered


async def test_an_empty_allow_from_lets_nobody_in(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    bot = feishu_settings(feishu, allow_from=[])
    async with serving_feishu(feishu, tmp_path, database_url, bot=bot) as served:
        await served.acked(await served.push(served.message("hello")))
        await served.acked(await served.push(served.message("/help")))
        await served.settle()
        stored = await served.stored()
    assert feishu.sent() == [] and stored == []


async def test_in_a_group_the_bot_answers_when_mentioned(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        await served.acked(await served.push(served.message("just chatting", **GROUP)))
        said = await ask(served, "what is up?", 1, mention_bot=True, **GROUP)
        stored = await served.stored("oc_group_1")
        sessions, _ = await served.app.state.services.sessions.list(tenant_id="default")
    assert said.text == "Hello from Tally."
    assert stored == [("user", "what is up?"), ("assistant", "Hello from Tally.")]
    assert len(sessions) == 1


async def test_group_policy_all_answers_every_message(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    bot = feishu_settings(feishu, group_policy="all")
    async with serving_feishu(feishu, tmp_path, database_url, bot=bot) as served:
        said = await ask(served, "anyone?", 1, **GROUP)
    assert said.text == "Hello from Tally."


async def test_new_starts_a_fresh_session_and_help_lists_the_commands(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        await ask(served, "first conversation", 1)
        new = await ask(served, "/new", 2)
        await ask(served, "second conversation", 3)
        second = await served.stored()
        help_text = await ask(served, "/help", 4)
        stop = await ask(served, "/stop", 5)
        listed, total = await served.app.state.services.sessions.list(tenant_id="default")
    assert "new conversation" in new.text and "Nothing is being written" in stop.text
    assert [t for r, t in second if r == "user"] == ["second conversation"]
    assert total == 2 and {s.channel for s in listed} == {"feishu"}
    assert all(f"/{word}" in help_text.text for word in ("new", "stop", "summary", "forget"))


async def test_summary_memory_and_forget_by_a_button_only_its_person_can_press(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        no_summary = await ask(served, "/summary", 1)
        store = served.app.state.services.memory
        facts = [NewEntry(source="manual", content=c) for c in ("Ada keeps bees", "Ada sails")]
        await store.append(tenant_id="default", scope_key="", entries=facts)
        remembered = await ask(served, "/memory", 2)
        card = await ask(served, "/forget", 3)
        first = card.buttons[0]
        card_id = "om_card_1"
        eve = served.press(first, message_id=card_id, operator="ou_eve")
        eve_ack = await served.acked(await served.push(eve))
        pressed = served.press(first, message_id=card_id)
        await served.acked(await served.push(pressed))
        (forgotten,) = await served.sent(1, reply_to=card_id)
        await served.settle()
        left = await store.read(tenant_id="default", scope_key="")
    assert "No summary yet" in no_summary.text
    assert "Ada keeps bees" in remembered.text and "Ada sails" in remembered.text
    assert card.msg_type == "interactive" and "forget" in card.text
    assert [b["text"]["content"] for b in card.buttons] == ["Ada keeps bees", "Ada sails"]
    assert "data" in eve_ack  # eve was told at once that the button is not hers
    assert forgotten.text == "Forgotten."
    assert [e.content for e in left.entries] == ["Ada sails"]
    assert len(feishu.sent(card_id)) == 1


async def test_a_picture_becomes_an_image_part_of_the_message(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["A nice picture."])
    async with serving_feishu(feishu, tmp_path, database_url, provider=provider) as served:
        event = served.message(image_key="img_v2_1")
        feishu.add_resource(event["event"]["message"]["message_id"], "img_v2_1", PNG)
        await served.push(event)
        (said,) = await served.sent(1)
        (request,) = provider.requests
    (image,) = request.messages[-1].images
    assert said.text == "A nice picture."
    assert image.media_type == "image/png" and base64.b64decode(image.data) == PNG


async def test_a_picture_feishu_cannot_hand_over_is_said_and_nothing_is_stored(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["I see nothing."])
    async with serving_feishu(feishu, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "", 1, image_key="img_gone")
        stored = await served.stored()
    assert "could not fetch that picture" in said.text and "photo_unavailable" in said.text
    assert stored == [] and provider.requests == []


async def test_a_fact_the_model_remembers_is_marked_with_its_chat(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada keeps bees"})
    provider = ScriptedProvider(replies=[])
    provider.push(ScriptedToolCalls([remember]), "Noted.")
    async with serving_feishu(feishu, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "remember: I keep bees", 1)
        memory = await served.client.get("/api/memory")
    (entry,) = memory.json()["entries"]
    assert said.text == "Noted."
    assert (entry["source"], entry["content"]) == ("feishu:fs:oc_p2p_ada", "Ada keeps bees")


async def test_health_shows_the_bot_connected(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        await ask(served, "hello", 1)
        health = (await served.client.get("/api/health")).json()
    (bot,) = [c for c in health["channels"] if c["bot"] == "fs"]
    assert (bot["kind"], bot["mode"], bot["connected"]) == ("feishu", "websocket", True)
