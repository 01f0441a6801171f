"""Who a WeCom app answers (allow_from by user id; events and other kinds of message are not
asked), its commands with their choices numbered, pictures, memory for its chats, and its
status in health and metrics."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.wecom_fixtures import ServedApp, app_settings, serving_app
from tests.fakes.wecom_server import FakeWeComServer

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def ask(served: ServedApp, text: str, count: int, user: str = "ada", **fields: Any) -> str:
    """Send `text` and wait for the `count`-th message the app sent to `user`."""
    answer = await served.post(served.message(text, user=user, **fields))
    assert answer.status_code == 200, answer.text
    return (await served.sent(count, to_user=user))[-1].content


async def test_allow_from_names_wecom_user_ids(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    bot = app_settings(wecom, allow_from=["ada", "@Bob"])
    async with serving_app(wecom, tmp_path, database_url, bot=bot) as served:
        await served.post(served.message("let me in", user="eve"))
        by_ada = await ask(served, "hello", 1)
        by_bob = await ask(served, "hello too", 1, user="bob")
        await served.settle()
    assert by_ada == by_bob == "Hello from Tally."
    assert wecom.sent("eve") == []  # kept and ignored, not answered


async def test_an_empty_allow_from_lets_nobody_in(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    bot = app_settings(wecom, allow_from=[])
    async with serving_app(wecom, tmp_path, database_url, bot=bot) as served:
        await served.post(served.message("hello"))
        await served.post(served.message("/help"))
        await served.settle()
        stored = await served.stored()
    assert wecom.sent() == [] and stored == []


async def test_events_and_voice_are_acknowledged_and_not_answered(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        entered = await served.post(served.message(msgtype="event", event="enter_agent"))
        voice = await served.post(served.message(msgtype="voice"))
        said = await ask(served, "and text?", 1)
    assert (entered.status_code, voice.status_code) == (200, 200)
    assert said == "Hello from Tally." and len(wecom.sent()) == 1


async def test_each_person_has_their_own_chat_and_commands(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        await ask(served, "first conversation", 1)
        new = await ask(served, "/new", 2)
        await ask(served, "second conversation", 3)
        await ask(served, "I am Bob", 1, user="bob")
        ada, bob = await served.stored(), await served.stored("bob")
        help_text = await ask(served, "/help", 4)
        listed, total = await served.app.state.services.sessions.list(tenant_id="default")
    assert "new conversation" in new
    assert [t for r, t in ada if r == "user"] == ["second conversation"]
    assert [t for r, t in bob if r == "user"] == ["I am Bob"]
    assert total == 3 and {s.channel for s in listed} == {"wecom"}
    assert all(f"/{word}" in help_text for word in ("new", "stop", "summary", "memory", "forget"))


async def test_summary_memory_and_forget_by_number(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        no_summary = await ask(served, "/summary", 1)
        store = served.app.state.services.memory
        facts = [NewEntry(source="manual", content=c) for c in ("Ada keeps bees", "Ada sails")]
        await store.append(tenant_id="default", scope_key="", entries=facts)
        remembered = await ask(served, "/memory", 2)
        choose = await ask(served, "/forget", 3)
        listed = [line for line in choose.splitlines() if line[:2] in ("1.", "2.")]
        forgotten = await ask(served, f"/forget {listed[0][:1]}", 4)
        wrong = await ask(served, "/forget 9", 5)
        left = await store.read(tenant_id="default", scope_key="")
    assert "No summary yet" in no_summary
    assert "Ada keeps bees" in remembered and "Ada sails" in remembered
    assert len(listed) == 2 and "/forget <number>" in choose
    gone = listed[0][3:]
    assert forgotten == f"Forgotten. ({gone})"
    assert "/forget <number>" in wrong
    assert [e.content for e in left.entries] == [f.content for f in facts if f.content != gone]


async def test_a_picture_becomes_an_image_part_of_the_message(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    wecom.files["media-1"] = PNG
    provider = ScriptedProvider(replies=["A nice picture."])
    async with serving_app(wecom, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "", 1, msgtype="image", media_id="media-1")
        (request,) = provider.requests
    (image,) = request.messages[-1].images
    assert said == "A nice picture."
    assert image.media_type == "image/png" and base64.b64decode(image.data) == PNG


async def test_a_picture_wecom_cannot_hand_over_is_said_and_nothing_is_stored(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["I see nothing."])
    async with serving_app(wecom, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "", 1, msgtype="image", media_id="gone")
        stored = await served.stored()
    assert "could not fetch that picture" in said and "photo_unavailable" in said
    assert stored == [] and provider.requests == []


async def test_a_fact_the_model_remembers_is_marked_with_its_chat(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada keeps bees"})
    provider = ScriptedProvider(replies=[])
    provider.push(ScriptedToolCalls([remember]), "Noted.")
    async with serving_app(wecom, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "remember: I keep bees", 1)
        memory = await served.client.get("/api/memory")
        stored = await served.stored()
    (entry,) = memory.json()["entries"]
    assert said == "Noted."
    assert stored == [("user", "remember: I keep bees"), ("assistant", "Noted.")]
    assert (entry["source"], entry["content"]) == ("wecom:wc:ada", "Ada keeps bees")


async def test_health_and_metrics_show_the_app(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        await ask(served, "hello", 1)
        health = (await served.client.get("/api/health")).json()
        metrics = (await served.client.get("/metrics")).text
    (app,) = [c for c in health["channels"] if c["bot"] == "wc"]
    assert (app["kind"], app["mode"], app["connected"]) == ("wecom", "app", True)
    assert 'tally_channel_events_total{bot="wc",event="reply",tenant="default"}' in metrics
