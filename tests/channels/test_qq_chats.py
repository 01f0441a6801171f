"""Who a QQ bot answers (allow_from by openid; groups: QQ delivers only @-messages), its
commands with their choices as numbered replies, and the line it would remember asked with
`/remember <id>` or `/discard <id>` (QQ's keyboards need the platform's approval)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.qq_fixtures import ServedQQ, qq_settings, serving_qq
from tests.fakes.qq_server import FakeQQServer
from tests.prompt_text import prompt_text


async def ask(served: ServedQQ, text: str, count: int, **fields: Any) -> str:
    """Send `text` privately (or in `group`) and wait for the `count`-th message the bot sent."""
    if "group" in fields:
        event = served.qq.group_message(text, **fields)
    else:
        event = served.qq.private_message(text, **fields)
    answer = await served.deliver(event)
    assert answer.status_code == 200
    return (await served.sent(count))[-1].text


async def test_allow_from_names_member_or_user_openids(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bot = qq_settings(qq, allow_from=["user-ada", "member-bob"])
    async with serving_qq(qq, tmp_path, database_url, bot=bot) as served:
        await served.deliver(qq.private_message("let me in", user="user-eve"))
        by_user = await ask(served, "privately", 1, user="user-ada")
        by_member = await ask(served, "in the group", 2, group="group-1", member="member-bob")
        await served.deliver(qq.group_message("me too", member="member-eve"))
        await served.settle()
    assert by_user == by_member == "Hello from Tally."
    assert len(qq.sent()) == 2  # eve's messages were kept and ignored, not answered


async def test_an_empty_allow_from_lets_nobody_in(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bot = qq_settings(qq, allow_from=[])
    async with serving_qq(qq, tmp_path, database_url, bot=bot) as served:
        await served.deliver(qq.private_message("hello"))
        await served.deliver(qq.private_message("/help"))
        await served.settle()
        stored = await served.stored()
    assert qq.sent() == [] and stored == []


async def test_summary_memory_and_forget_by_number(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url) as served:
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


async def test_new_stop_and_help_in_a_private_chat(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url) as served:
        await ask(served, "first conversation", 1)
        new = await ask(served, "/new", 2)
        await ask(served, "second conversation", 3)
        second = await served.stored()
        stop = await ask(served, "/stop", 4)
        help_text = await ask(served, "/help", 5)
        listed, total = await served.app.state.services.sessions.list(tenant_id="default")
    assert "new conversation" in new and stop
    assert [t for r, t in second if r == "user"] == ["second conversation"]
    assert total == 2 and {s.channel for s in listed} == {"qq"}
    assert all(f"/{word}" in help_text for word in ("new", "stop", "summary", "memory", "forget"))


async def test_a_line_to_remember_is_asked_with_commands_and_answered_by_its_person(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    write = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada works nights"})
    provider.push(ScriptedToolCalls([write]), "Shall I keep that?")
    memory = {"confirm_writes": True, "scope": "user"}
    async with serving_qq(qq, tmp_path, database_url, provider=provider, memory=memory) as served:
        await served.deliver(qq.private_message("I work nights", user="user-ada"))
        question = (await served.sent(2))[-1].text
        proposal_id = question.split("/remember ")[1].split(" ")[0]
        by_bob = await ask(served, f"/remember {proposal_id}", 3, user="user-bob")
        kept = await ask(served, f"/remember {proposal_id}", 4, user="user-ada")
        twice = await ask(served, f"/discard {proposal_id}", 5, user="user-ada")
        await ask(served, "and now?", 6, user="user-ada")
        after = prompt_text(provider.requests[-1])
    assert "Should I remember this about you?" in question and "Ada works nights" in question
    assert "not waiting for your answer" in by_bob
    assert kept == "Remembered." and "answered already" in twice
    assert "Ada works nights" in after


async def test_a_fact_the_model_remembers_is_marked_with_its_chat(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "the group ships Friday"})
    provider = ScriptedProvider(replies=[])
    provider.push(ScriptedToolCalls([remember]), "Noted.")
    async with serving_qq(qq, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "remember: we ship Friday", 1, group="group-3")
        memory = await served.client.get("/api/memory")
        health = (await served.client.get("/api/health")).json()
    (entry,) = memory.json()["entries"]
    assert said == "Noted."
    assert (entry["source"], entry["content"]) == ("qq:qb:group-3", "the group ships Friday")
    (bot,) = [c for c in health["channels"] if c["bot"] == "qb"]
    assert (bot["kind"], bot["mode"], bot["connected"]) == ("qq", "webhook", True)


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def test_a_picture_becomes_an_image_part_of_the_message(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    qq.add_file("pic-1", PNG)
    provider = ScriptedProvider(replies=["A nice picture."])
    async with serving_qq(qq, tmp_path, database_url, provider=provider) as served:
        await served.deliver(qq.private_message("", picture="pic-1"))
        (reply,) = await served.sent(1)
        (request,) = provider.requests
    (image,) = request.messages[-1].images
    assert reply.text == "A nice picture."
    assert image.media_type == "image/png" and base64.b64decode(image.data) == PNG


async def test_a_picture_qq_cannot_hand_over_is_said_and_nothing_is_stored(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["I see nothing."])
    async with serving_qq(qq, tmp_path, database_url, provider=provider) as served:
        await served.deliver(qq.private_message("look", picture="expired"))
        (said,) = await served.sent(1)
        stored = await served.stored()
    assert "could not fetch that picture" in said.text and "photo_unavailable" in said.text
    assert stored == [] and provider.requests == []


async def test_a_picture_on_another_host_is_never_fetched(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    qq.add_file("pic-1", PNG)
    provider = ScriptedProvider(replies=["I see nothing."])
    event = qq.private_message("look", picture="pic-1")
    evil = f"http://localhost:{qq.port}/files/pic-1"  # the same fake under another name
    event["d"]["attachments"][0]["url"] = evil
    async with serving_qq(qq, tmp_path, database_url, provider=provider) as served:
        await served.deliver(event)
        (said,) = await served.sent(1)
    assert "could not fetch that picture" in said.text and provider.requests == []
    assert not [r for r in qq.requests if r.path.startswith("/files/")]
