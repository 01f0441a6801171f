"""Who a Slack bot answers (allow_from, channels, bots, edits and joins), its commands and
their Block Kit buttons (answered only by their person), tool approval in a thread, pictures,
and memory marked with its conversation."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from backend.domain.messages import ToolCall
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.slack_fixtures import ServedSlack, serving_slack, signed, slack_settings
from tests.fakes.slack_server import FakeSlackServer, Sent

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
TOOLS = {
    "enabled": ["now"],
    "workspace": {"enabled": True},
    "approval": {"required": ["write_file"], "timeout_s": 600},
}


async def ask(served: ServedSlack, text: str, count: int, **fields: Any) -> Sent:
    """Send `text` (a direct message from Ada unless `fields` say otherwise) and wait for the
    `count`-th message the bot posted."""
    await served.acked(await served.push(served.slack.event(text, **fields)))
    return (await served.sent(count))[-1]


async def test_allow_from_names_slack_user_ids(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    bot = slack_settings(slack, allow_from=["U0ADA"])
    async with serving_slack(slack, tmp_path, database_url, bot=bot) as served:
        await served.acked(await served.push(slack.event("let me in", user="U0EVE")))
        said = await ask(served, "hello", 1)
        await served.settle()
    assert said.text == "Hello from Tally."
    assert len(slack.sent()) == 1  # eve's message was kept and ignored, not answered


async def test_an_empty_allow_from_lets_nobody_in(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    bot = slack_settings(slack, allow_from=[])
    async with serving_slack(slack, tmp_path, database_url, bot=bot) as served:
        await served.acked(await served.push(slack.event("hello")))
        await served.acked(await served.push(slack.event(" /help")))
        await served.settle()
        stored = await served.stored()
    assert slack.sent() == [] and stored == []


async def test_bot_messages_edits_and_joins_are_not_answered(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        ignored = [
            slack.event("from a bot", bot_id="B0OTHER", subtype="bot_message"),
            slack.event("edited", subtype="message_changed"),
            slack.event(
                "<@U0ADA> has joined the channel", channel="C0TEAM", subtype="channel_join"
            ),
            slack.event("my own words", user="UBOT"),
            slack.event("", kind="reaction_added"),
        ]
        for payload in ignored:
            await served.acked(await served.push(payload))
        said = await ask(served, "and a real one", 1)
        await served.settle()
    assert said.text == "Hello from Tally." and len(slack.sent()) == 1


async def test_in_a_channel_the_bot_answers_when_mentioned(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        await served.acked(await served.push(slack.event("just chatting", channel="C0TEAM")))
        said = await ask(served, "<@UBOT> what is up?", 1, channel="C0TEAM", kind="app_mention")
        stored = await served.stored("C0TEAM")
    assert said.text == "Hello from Tally."
    assert stored == [("user", "what is up?"), ("assistant", "Hello from Tally.")]


async def test_group_policy_all_answers_every_channel_message_once(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    bot = slack_settings(slack, group_policy="all")
    async with serving_slack(slack, tmp_path, database_url, bot=bot) as served:
        said = await ask(served, "anyone?", 1, channel="C0TEAM")
        mention = slack.event("<@UBOT> you?", channel="C0TEAM", kind="app_mention")
        await served.acked(await served.push(mention))  # comes as a `message` too
        await ask(served, "<@UBOT> you?", 2, channel="C0TEAM")
        await served.settle()
    assert said.text == "Hello from Tally." and len(slack.sent()) == 2


async def test_commands_new_summary_memory_and_forget_with_buttons(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        await ask(served, "first conversation", 1)
        new = await ask(served, " /new", 2)  # Slack's clients send "/…" with a leading space
        no_summary = await ask(served, "/summary", 3)
        store = served.app.state.services.memory
        scope = ""  # memory.scope: tenant (the default): one memory for everyone
        facts = [NewEntry(source="manual", content=c) for c in ("Ada keeps bees", "Ada sails")]
        await store.append(tenant_id="default", scope_key=scope, entries=facts)
        remembered = await ask(served, "/memory", 4)
        choose = await ask(served, "/forget", 5)
        stranger = slack.press(choose, "Ada keeps bees", user="U0EVE")
        await served.acked(await served.push(stranger, "interactive"))
        (refusal,) = await served.sent(1, "chat.postEphemeral")
        await served.acked(await served.push(slack.press(choose, "Ada keeps bees"), "interactive"))
        (updated,) = await served.sent(1, "chat.update")
        left = await store.read(tenant_id="default", scope_key=scope)
    assert "new conversation" in new.text and "No summary yet" in no_summary.text
    assert "Ada keeps bees" in remembered.text and "Ada sails" in remembered.text
    labels = [b["text"]["text"] for b in choose.buttons()]
    assert {"Ada keeps bees", "Ada sails"} <= set(labels)
    assert (refusal.user, refusal.text) == ("U0EVE", "That question is for <@U0ADA>.")
    assert (updated.ts, updated.text) == (choose.ts, "Forgotten.")
    contents = [e.content for e in left.entries]
    assert "Ada sails" in contents and "Ada keeps bees" not in contents


async def test_a_line_to_remember_is_asked_with_buttons_only_its_person_answers(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada keeps bees"})
    provider.push(ScriptedToolCalls([remember]), "Shall I keep that?")
    memory = {"path": str(tmp_path / "MEMORY.md"), "scope": "user", "confirm_writes": True}
    async with serving_slack(
        slack, tmp_path, database_url, provider=provider, memory=memory
    ) as served:
        await ask(served, "I keep bees", 1)
        question = (await served.sent(2))[-1]
        eve = slack.press(question, "Remember", user="U0EVE")
        await served.acked(await served.push(eve, "interactive"))
        (refusal,) = await served.sent(1, "chat.postEphemeral")
        await served.acked(await served.push(slack.press(question, "Remember"), "interactive"))
        (updated,) = await served.sent(1, "chat.update")
        listed = await ask(served, "/memory", 3)
    assert "Should I remember this about you?" in question.text
    assert [b["text"]["text"] for b in question.buttons()] == ["Remember", "Discard"]
    assert "/remember" not in question.text  # buttons: the commands are not told
    assert refusal.user == "U0EVE" and "for <@U0ADA>" in refusal.text
    assert "Ada keeps bees" in updated.text and updated.text.endswith("Remembered.")
    assert "Ada keeps bees" in listed.text


async def test_a_tool_call_is_approved_with_a_button_in_the_thread(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider()
    write: dict[str, object] = {"path": "note.txt", "content": "from Slack"}
    provider.push(ScriptedToolCalls([ToolCall("call_1", "write_file", write)]), "Saved.")
    async with serving_slack(
        slack, tmp_path, database_url, provider=provider, tools=TOOLS
    ) as served:
        question = await ask(served, "<@UBOT> save a note", 1, channel="C0TEAM", kind="app_mention")
        await served.acked(await served.push(slack.press(question, "Approve"), "interactive"))
        _, reply = await served.sent(2)
        (updated,) = await served.sent(1, "chat.update")
    note = tmp_path / "data" / "workspaces" / "default" / "note.txt"
    assert question.thread_ts is not None and reply.thread_ts == question.thread_ts
    assert reply.text == "Saved." and note.read_text() == "from Slack"
    assert updated.text.endswith("Approved: it runs now.")


async def test_a_button_pressed_over_the_events_api_is_answered(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    """Interactivity posts a signed form (`payload=<json>`) to the same URL."""
    bot = slack_settings(slack, mode="events")
    async with serving_slack(slack, tmp_path, database_url, bot=bot) as served:
        store = served.app.state.services.memory
        fact = NewEntry(source="manual", content="Ada keeps bees")
        await store.append(tenant_id="default", scope_key="", entries=[fact])
        await served.post(slack.event("/forget"))
        (choose,) = await served.sent(1)
        pressed = await served.post(slack.press(choose, "Ada keeps bees"), form=True)
        (updated,) = await served.sent(1, "chat.update")
        left = await store.read(tenant_id="default", scope_key="")
    assert pressed.status_code == 200 and updated.text == "Forgotten."
    assert left.entries == ()


async def test_slash_commands_are_answered_in_socket_mode_and_over_http(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        for command in (
            slack.slash("/tally", "new", channel="C0TEAM"),  # one command of the app's own
            slack.slash("/memory"),
        ):
            await served.acked(await served.push(command, "slash_commands"))
        new, memory = await served.sent(2)
    bot = slack_settings(slack, mode="events")
    async with serving_slack(slack, tmp_path, database_url, bot=bot) as served:
        body = urlencode(slack.slash("/forget")).encode()
        form = {"content-type": "application/x-www-form-urlencoded"}
        answer = await served.client.post(
            "/channels/default/sl", content=body, headers=form | signed(body)
        )
        *_, forget = await served.sent(3)
    assert (new.channel, new.thread_ts) == ("C0TEAM", None)
    assert "new conversation" in new.text and memory.text == "I remember nothing yet."
    assert answer.status_code == 200 and forget.text == "I remember nothing yet."


async def test_a_picture_becomes_an_image_part_of_the_message(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    url = slack.add_file("F1.png", PNG)
    files = [{"id": "F1", "mimetype": "image/png", "url_private": url, "size": len(PNG)}]
    provider = ScriptedProvider(replies=["A nice picture."])
    async with serving_slack(slack, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "look", 1, subtype="file_share", files=files)
        (request,) = provider.requests
    (image,) = request.messages[-1].images
    assert said.text == "A nice picture."
    assert image.media_type == "image/png" and base64.b64decode(image.data) == PNG


async def test_a_picture_slack_cannot_hand_over_is_said_and_nothing_is_stored(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    gone = [{"id": "F2", "mimetype": "image/png", "url_private": f"{slack.base_url}/files/F2"}]
    elsewhere = [{"id": "F3", "mimetype": "image/png", "url_private": "https://evil.test/f"}]
    provider = ScriptedProvider(replies=["I see nothing."])
    async with serving_slack(slack, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "", 1, subtype="file_share", files=gone)
        other = await ask(served, "", 2, subtype="file_share", files=elsewhere)
        stored = await served.stored()
    assert "could not fetch that picture" in said.text and "photo_unavailable" in said.text
    assert "could not fetch" in other.text
    assert stored == [] and provider.requests == []


async def test_a_fact_the_model_remembers_is_marked_with_its_conversation(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada keeps bees"})
    provider = ScriptedProvider(replies=[])
    provider.push(ScriptedToolCalls([remember]), "Noted.")
    async with serving_slack(slack, tmp_path, database_url, provider=provider) as served:
        said = await ask(served, "remember: I keep bees", 1)
        memory = await served.client.get("/api/memory")
    (entry,) = memory.json()["entries"]
    assert said.text == "Noted."
    assert (entry["source"], entry["content"]) == ("slack:sl:D0ADA", "Ada keeps bees")


async def test_health_shows_the_bot(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        await ask(served, "hello", 1)
        health = (await served.client.get("/api/health")).json()
    (bot,) = [c for c in health["channels"] if c["bot"] == "sl"]
    assert (bot["kind"], bot["mode"], bot["connected"]) == ("slack", "socket", True)
    assert json.dumps(bot)  # serialisable as the API shows it
