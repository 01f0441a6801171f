"""A QQ bot over the websocket gateway: HELLO, IDENTIFY with the intents of group and private
messages, heartbeats, each dispatch kept before the next is read, and after a dropped
connection a RESUME that gets every dispatch sent meanwhile: none lost, none answered twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.channels.qq_fixtures import APP_ID, APP_SECRET, qq_settings, serving_qq
from tests.fakes.qq_server import FakeQQServer

GROUP_AND_C2C = 1 << 25


async def test_gateway_a_message_in_a_reply_out_stored_as_a_web_turn(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bot = qq_settings(qq, mode="websocket")
    async with serving_qq(qq, tmp_path, database_url, bot=bot) as served:
        event = qq.private_message("Hi over the gateway")
        await served.push(event)
        (reply,) = await served.sent(1)
        stored = await served.stored()
        webhook = await served.deliver(qq.private_message("by webhook?"))
    (identify,) = [f for f in qq.frames if f["op"] == 2]
    assert identify["d"]["intents"] & GROUP_AND_C2C
    assert identify["d"]["token"].startswith("QQBot ")
    assert (reply.msg_id, reply.text) == (event["d"]["id"], "Hello from Tally.")
    assert stored == [("user", "Hi over the gateway"), ("assistant", "Hello from Tally.")]
    assert webhook.status_code == 404  # a websocket bot takes no webhook calls


async def test_a_dropped_gateway_is_resumed_and_loses_no_message(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bot = qq_settings(qq, mode="websocket")
    async with serving_qq(qq, tmp_path, database_url, bot=bot) as served:
        await served.push(qq.private_message("before the drop"))
        await served.sent(1)
        qq.drop_connections(APP_ID)
        await served.push(qq.private_message("while it was down"))  # QQ holds it
        await served.push(qq.group_message("in the group meanwhile", group="group-2"))
        await asyncio.to_thread(qq.wait_connected, APP_ID, 2)
        await served.sent(3)
        await served.settle()
        private = await served.stored()
        group = await served.stored("group-2")
    (resume,) = [f for f in qq.frames if f["op"] == 6]
    assert resume["d"]["seq"] == 1  # the last dispatch it had kept
    assert [text for role, text in private if role == "user"] == [
        "before the drop",
        "while it was down",
    ]
    assert [text for role, text in group if role == "user"] == ["in the group meanwhile"]
    assert len(qq.sent()) == 3


async def test_a_dispatch_delivered_twice_is_answered_once(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bot = qq_settings(qq, mode="websocket")
    async with serving_qq(qq, tmp_path, database_url, bot=bot) as served:
        event = qq.private_message("once please")
        await served.push(event)
        await served.push(event)  # the same message again (its id)
        await served.sent(1)
        await served.push(qq.private_message("and then this"))
        await served.sent(2)
        stored = await served.stored()
    assert [text for role, text in stored if role == "user"] == ["once please", "and then this"]
    assert len(qq.sent()) == 2


@pytest.mark.slow
async def test_heartbeats_carry_the_last_kept_sequence_and_an_unanswered_one_reconnects(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QQ_APP_SECRET", APP_SECRET)
    with FakeQQServer(heartbeat_interval_ms=1_000) as qq:
        qq.add_app(APP_ID, APP_SECRET)
        bot = qq_settings(qq, mode="websocket")
        async with serving_qq(qq, tmp_path, database_url, bot=bot) as served:
            await served.push(qq.private_message("hello"))
            await served.sent(1)
            beat = lambda fake: any(f["op"] == 1 and f["d"] == 1 for f in fake.frames)  # noqa: E731
            await asyncio.to_thread(qq.wait_until, beat, "a heartbeat with seq 1")
            qq.answer_heartbeats = False  # the link looks open but QQ says nothing
            await served.push(qq.private_message("are you there?"))
            await served.sent(2)
            await asyncio.to_thread(qq.wait_connected, APP_ID, 2)
            qq.answer_heartbeats = True
            await served.push(qq.private_message("after the reconnect"))
            await served.sent(3)
            await served.settle()
    resumes = [f for f in qq.frames if f["op"] == 6]
    # 2, or 1 when the link was closed before "are you there?" reached it (QQ resends it then)
    assert resumes and resumes[0]["d"]["seq"] in (1, 2)
    assert [s.text for s in qq.sent()] == ["Hello from Tally."] * 3  # each answered once
