"""A WeCom intelligent robot end to end: the real `wecom-aibot-python-sdk` over a websocket to
a fake WeCom long connection (`tests/fakes/wecom_robot_server.py`); each message kept by its
`msgid` and answered once, as a stream message on the connection, stored as a web turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import select

from backend.memory.entries import NewEntry
from backend.storage.tables import channel_updates
from tests.channels.wecom_fixtures import (
    BOT_ID,
    BOT_SECRET,
    ServedRobot,
    robot_settings,
    serving_robot,
)
from tests.fakes.wecom_robot_server import FakeRobotServer


async def ask(served: ServedRobot, text: str, count: int, **fields: str) -> str:
    await served.push(served.robot.message(text, **fields))
    return (await served.replies(count))[-1].content


async def test_a_message_in_a_stream_reply_out_stored_as_a_web_turn(
    wecom_robot: FakeRobotServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(wecom_robot, tmp_path, database_url) as served:
        frame = wecom_robot.message("Hi there!")
        await served.push(frame)
        (reply,) = await served.replies(1)
        stored = await served.stored()
        health = (await served.client.get("/api/health")).json()
    assert wecom_robot.subscribes[0] == {"bot_id": BOT_ID, "secret": BOT_SECRET}
    assert (reply.req_id, reply.msgtype, reply.finish) == (
        frame["headers"]["req_id"],
        "stream",
        True,
    )
    assert reply.content == "Hello from Tally."
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]
    (robot,) = [c for c in health["channels"] if c["bot"] == "wr"]
    assert (robot["kind"], robot["mode"], robot["connected"]) == ("wecom", "robot", True)


async def test_a_frame_delivered_twice_is_answered_once(
    wecom_robot: FakeRobotServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(wecom_robot, tmp_path, database_url) as served:
        frame = wecom_robot.message("once please")
        await served.push(frame)
        await served.push(frame)
        await served.replies(1)
        await served.push(wecom_robot.message("and then this"))
        await served.replies(2)
        await served.settle()
        stored = await served.stored()
    assert [t for r, t in stored if r == "user"] == ["once please", "and then this"]
    assert len(wecom_robot.replies()) == 2


async def test_in_a_group_the_robots_mention_is_taken_out_and_the_group_is_one_chat(
    wecom_robot: FakeRobotServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(wecom_robot, tmp_path, database_url) as served:
        said = await ask(served, "@Tally what is up?", 1, chat_id="group-1")
        await ask(served, "@Tally and for me?", 2, chat_id="group-1", user="bob")
        stored = await served.stored("group-1")
        sessions, _ = await served.app.state.services.sessions.list(tenant_id="default")
    assert said == "Hello from Tally."
    assert [t for r, t in stored if r == "user"] == ["what is up?", "and for me?"]
    assert len(sessions) == 1 and sessions[0].user_key is None


async def test_allow_from_and_commands_by_number(
    wecom_robot: FakeRobotServer, tmp_path: Path, database_url: str
) -> None:
    bot = robot_settings(wecom_robot, allow_from=["ada"])
    async with serving_robot(wecom_robot, tmp_path, database_url, bot=bot) as served:
        await served.push(wecom_robot.message("let me in", user="eve"))
        store = served.app.state.services.memory
        facts = [NewEntry(source="manual", content=c) for c in ("Ada keeps bees", "Ada sails")]
        await store.append(tenant_id="default", scope_key="", entries=facts)
        await served.push(wecom_robot.message("/forget"))
        (card,) = await served.replies(1)
        forgotten = await ask(served, "/forget 1", 2)  # typed instead of pressed
        await served.settle()
    choose = card.body["template_card"]["sub_title_text"]
    assert "1. " in choose and "/forget <number>" in choose
    assert forgotten.startswith("Forgotten.")
    assert len(wecom_robot.replies()) == 2  # eve's message was kept and ignored


async def test_a_robot_whose_secret_is_refused_is_not_connected_and_says_why(
    wecom_robot: FakeRobotServer, tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WC_BOT_SECRET", "rotated")
    async with serving_robot(wecom_robot, tmp_path, database_url, connected=False) as served:
        await asyncio.to_thread(wecom_robot.wait_connected)
        channel = served.app.state.channels.get("default", "wr")
        await asyncio.to_thread(
            wecom_robot.wait_until, lambda _: channel.status.last_error is not None, "an error"
        )
        status = channel.status
    assert status.is_connected is False
    assert "Authentication failed" in (status.last_error or "") and "40001" in status.last_error


async def test_forget_offers_a_template_card_whose_button_forgets(
    wecom_robot: FakeRobotServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(wecom_robot, tmp_path, database_url) as served:
        store = served.app.state.services.memory
        facts = [NewEntry(source="manual", content=c) for c in ("Ada keeps bees", "Ada sails")]
        await store.append(tenant_id="default", scope_key="", entries=facts)
        await served.push(wecom_robot.message("/forget"))
        (card,) = await served.replies(1)
        buttons = card.body["template_card"]["button_list"]
        first = buttons[0]
        await served.push(wecom_robot.press(card, first["key"]))
        _, updated = await served.replies(2)
        left = await store.read(tenant_id="default", scope_key="")
    assert card.msgtype == "template_card"
    assert card.body["template_card"]["card_type"] == "button_interaction"
    assert len(buttons) == 2 and first["text"].startswith("1. ")
    assert "1. Ada keeps bees" in card.body["template_card"]["sub_title_text"]
    assert updated.msgtype == "update_template_card"
    notice = updated.body["template_card"]
    assert notice["task_id"] == card.body["template_card"]["task_id"]
    assert notice["sub_title_text"] == "Forgotten."
    assert [e.content for e in left.entries] == ["Ada sails"]


async def test_bad_frames_are_refused_and_recorded_and_the_robot_answers_the_next(
    wecom_robot: FakeRobotServer, tmp_path: Path, database_url: str
) -> None:
    def broken(**body: object) -> dict[str, object]:
        frame = wecom_robot.message("hi")
        frame["body"] = {**frame["body"], **body}
        return frame

    bad = [
        broken(msgid={"an": "object"}),
        broken(msgid=""),
        broken(chattype="group"),  # without its chatid
        broken(chattype="channel"),
        broken(text={"content": {"nested": 1}}),
        broken(**{"from": "ada"}),
        broken(create_time=float("inf")),
    ]
    async with serving_robot(wecom_robot, tmp_path, database_url) as served:
        await served.push("{not json")  # the SDK drops what it cannot parse
        for frame in bad:
            await served.push(frame)
        said = await ask(served, "still there?", 1)
        await served.settle()
        async with served.app.state.services.database.read() as conn:
            refused = (
                await conn.execute(
                    select(channel_updates.c.error).where(channel_updates.c.status == "refused")
                )
            ).all()
    assert said == "Hello from Tally."
    assert len(refused) == len(bad) and all(row.error for row in refused)
