"""Who a DingTalk robot answers (allow_from, groups), its commands, pictures, memory for its
conversations, and its status in health and metrics."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.conftest import ServedRobot, robot_settings, serving_robot
from tests.fakes.dingtalk_server import FakeDingTalkServer

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
GROUP = {"conversation_id": "cid-group-1", "conversation_type": "2"}


async def ask(served: ServedRobot, text: str, count: int, **fields: Any) -> str:
    """Send `text` and wait for the `count`-th message the robot sent."""
    await served.push(served.message(text, **fields))
    return (await served.sent(count))[-1].text


async def test_allow_from_names_staff_or_sender_ids(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    bot = robot_settings(dingtalk, allow_from=["staff-ada", "$:LWCP_v1:$bob"])
    async with serving_robot(dingtalk, tmp_path, database_url, bot=bot) as served:
        stranger = served.message("let me in", sender_staff_id="staff-eve", sender_id="$:eve")
        await served.acked(await served.push(stranger))
        by_staff = await ask(served, "by staff id", 1, sender_staff_id="staff-ada")
        by_sender = await ask(
            served, "by sender id", 2, sender_staff_id="", sender_id="$:LWCP_v1:$bob"
        )
        await served.settle()
    assert by_staff == by_sender == "Hello from Tally."
    assert len(dingtalk.sent()) == 2  # eve's message was kept and ignored, not answered


async def test_an_empty_allow_from_lets_nobody_in(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    bot = robot_settings(dingtalk, allow_from=[])
    async with serving_robot(dingtalk, tmp_path, database_url, bot=bot) as served:
        await served.acked(await served.push(served.message("hello")))
        await served.acked(await served.push(served.message("/help")))
        await served.settle()
        stored = await served.stored()
    assert dingtalk.sent() == [] and stored == []


async def test_in_a_group_the_robot_answers_when_mentioned(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        await served.acked(await served.push(served.message("just chatting", **GROUP)))
        said = await ask(served, "what is up?", 1, is_in_at_list=True, **GROUP)
        stored = await served.stored("cid-group-1")
        sessions, _ = await served.app.state.services.sessions.list(tenant_id="default")
    assert said == "Hello from Tally."
    assert stored == [("user", "what is up?"), ("assistant", "Hello from Tally.")]
    assert len(sessions) == 1


async def test_group_policy_all_answers_every_message(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    bot = robot_settings(dingtalk, group_policy="all")
    async with serving_robot(dingtalk, tmp_path, database_url, bot=bot) as served:
        said = await ask(served, "anyone?", 1, **GROUP)
    assert said == "Hello from Tally."


async def test_new_starts_a_fresh_session_and_help_lists_the_commands(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        await ask(served, "first conversation", 1)
        new = await ask(served, "/new", 2)
        await ask(served, "second conversation", 3)
        second = await served.stored()
        help_text = await ask(served, "/help", 4)
        listed, total = await served.app.state.services.sessions.list(tenant_id="default")
    assert "new conversation" in new
    assert [t for r, t in second if r == "user"] == ["second conversation"]
    assert total == 2 and {s.channel for s in listed} == {"dingtalk"}
    assert all(f"/{word}" in help_text for word in ("new", "stop", "summary", "memory", "forget"))


async def test_summary_memory_and_forget_by_number(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
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
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    dingtalk.add_file("pic-1", PNG)
    provider = ScriptedProvider(replies=["A nice picture."])
    async with serving_robot(dingtalk, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "", 1, msgtype="picture", download_code="pic-1")
        (request,) = provider.requests
    (image,) = request.messages[-1].images
    assert said == "A nice picture."
    assert image.media_type == "image/png" and base64.b64decode(image.data) == PNG


async def test_a_picture_dingtalk_cannot_hand_over_is_said_and_nothing_is_stored(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["I see nothing."])
    async with serving_robot(dingtalk, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "", 1, msgtype="picture", download_code="gone")
        stored = await served.stored()
    assert "could not fetch that picture" in said and "photo_unavailable" in said
    assert stored == [] and provider.requests == []


async def test_a_fact_the_model_remembers_is_marked_with_its_conversation(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada keeps bees"})
    provider = ScriptedProvider(replies=[])
    provider.push(ScriptedToolCalls([remember]), "Noted.")
    async with serving_robot(dingtalk, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "remember: I keep bees", 1)
        memory = await served.client.get("/api/memory")
        stored = await served.stored()
    (entry,) = memory.json()["entries"]
    assert said == "Noted."
    assert stored == [("user", "remember: I keep bees"), ("assistant", "Noted.")]
    assert (entry["source"], entry["content"]) == ("dingtalk:dt:cid-private-1", "Ada keeps bees")


async def test_health_and_metrics_show_the_robot(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        await ask(served, "hello", 1)
        health = (await served.client.get("/api/health")).json()
        metrics = (await served.client.get("/metrics")).text
    (robot,) = [c for c in health["channels"] if c["bot"] == "dt"]
    assert (robot["kind"], robot["mode"], robot["connected"]) == ("dingtalk", "stream", True)
    assert 'tally_channel_events_total{bot="dt",event="reply",tenant="default"}' in metrics
