"""A DingTalk robot end to end: the real `dingtalk-stream` SDK against a fake gateway (Stream
mode), and signed HTTP callbacks at `POST /channels/{tenant}/{bot}`; turns stored exactly as a
web turn's; every message answered once, and replies only ever sent to DingTalk's own hosts."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import func, select

from backend.channels.dingtalk.format import MAX_CHARS
from backend.channels.dingtalk.signature import sign
from backend.storage.tables import channel_updates
from tests.channels.conftest import ServedRobot, robot_settings, serving_robot, signed
from tests.fakes.dingtalk_server import FakeDingTalkServer

HOUR_MS = 3_600_000


def test_the_callback_signature_matches_dingtalks_known_answer() -> None:
    assert sign("1577262236757", "testsecret") == "J+BiSbR3jshnMXl7lBt86VHVkxu/BShC2VzSWYBVCKE="


async def test_stream_a_message_in_a_reply_out_stored_as_a_web_turn(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        message = served.message("Hi there!")
        ack = await served.acked(await served.push(message))
        kept_when_acked = await kept(served, message["msgId"])
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert ack["code"] == 200 and kept_when_acked
    assert (reply.via, reply.text, reply.msgtype) == ("session", "Hello from Tally.", "markdown")
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]


async def test_a_frame_delivered_twice_is_acknowledged_twice_and_answered_once(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        message = served.message("once please")
        await served.acked(await served.push(message))
        await served.acked(await served.push(message))  # DingTalk's redelivery: same msgId
        await served.sent(1)
        await served.acked(await served.push(served.message("and then this")))
        await served.sent(2)
        stored = await served.stored()
    assert [text for role, text in stored if role == "user"] == ["once please", "and then this"]
    assert len(dingtalk.sent()) == 2


async def test_callbacks_are_checked_signed_fresh_and_once(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    bot = robot_settings(dingtalk, mode="callback")
    async with serving_robot(dingtalk, tmp_path, database_url, bot=bot) as served:
        forged = await served.callback(served.message("forged"), {**signed(), "sign": "bad"})
        unsigned = await served.callback(served.message("unsigned"), {})
        stale = await served.callback(
            served.message("old"), signed(int(time.time() * 1000) - 2 * HOUR_MS)
        )
        other_secret = await served.callback(served.message("x"), signed(secret="not-ours"))
        refused_rows = await count_updates(served)

        message = served.message("Hello by callback")
        headers = signed()
        good = await served.callback(message, headers)
        (reply,) = await served.sent(1)
        again = await served.callback(message, signed())  # a redelivery: answered once
        replay = await served.callback(served.message("injected"), headers)  # same sign, new body
        await served.settle()
        stored = await served.stored()
    assert [r.status_code for r in (forged, unsigned, stale, other_secret)] == [401] * 4
    assert "an hour" in stale.json()["error"]["message"]
    assert refused_rows == 0
    assert good.status_code == 200 and reply.text == "Hello from Tally."
    assert again.status_code == 200 and replay.status_code == 401
    assert stored == [("user", "Hello by callback"), ("assistant", "Hello from Tally.")]
    assert len(dingtalk.sent()) == 1


async def test_a_callback_that_is_no_robot_message_is_recorded_as_refused_and_answered(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    """Answered 200, so DingTalk does not deliver it again and again (tests/channels/
    test_bad_updates.py probes every kind of bad body)."""
    bot = robot_settings(dingtalk, mode="callback")
    async with serving_robot(dingtalk, tmp_path, database_url, bot=bot) as served:
        not_json = await served.client.post(
            "/channels/default/dt", content=b"{nope", headers=signed()
        )
        no_id = await served.callback({"msgtype": "text", "text": {"content": "hi"}})
        rows = await count_updates(served)
        stored = await served.stored()
    assert (not_json.status_code, no_id.status_code) == (200, 200)
    assert "not JSON" in not_json.json()["refused"] and "msgId" in no_id.json()["refused"]
    assert rows == 2 and stored == []


async def test_a_stream_robot_takes_no_callbacks(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        answer = await served.callback(served.message("hello?"))
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


async def test_a_session_webhook_on_another_host_is_never_called(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    # The same fake under another name: any request to it would be recorded.
    evil = f"http://localhost:{dingtalk.port}/robot/sendBySession?session=stolen"
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        await served.push(served.message("private", session_webhook=evil))
        (private,) = await served.sent(1)
        group = served.message(
            "group", conversation_id="cid-group-1", conversation_type="2", is_in_at_list=True
        )
        group["sessionWebhook"] = evil
        await served.push(group)
        (in_group,) = await served.sent(1, target="cid-group-1")
    assert (private.via, private.target) == ("batchSend", "staff-1")
    assert in_group.via == "groupSend"
    assert not [r for r in dingtalk.requests if r.headers.get("host", "").startswith("localhost")]


async def test_an_expired_session_webhook_falls_back_to_the_openapi_send(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        await served.push(served.message("late", webhook_expires_in_s=-60))
        (by_time,) = await served.sent(1)
        gone = served.message("gone early")
        dingtalk.expire_session(gone["sessionWebhook"])  # DingTalk says so: errcode 300001
        await served.push(gone)
        _, by_answer = await served.sent(2)
    assert by_time.via == "batchSend" and by_answer.via == "batchSend"
    assert dingtalk.token_requests == 1  # the access token is cached between sends


async def test_a_long_reply_arrives_in_ordered_chunks_within_the_limit(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    paragraphs = [f"Paragraph {n}: " + "words " * 150 for n in range(14)]
    reply = "\n\n".join(paragraphs)
    assert len(reply) > 2 * MAX_CHARS
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        served.provider.push(reply)
        await served.acked(await served.push(served.message("tell me a lot")))
        await served.settle()  # the ACK came after the message was kept: it is in hand
        chunks = dingtalk.sent()
        stored = await served.stored()
    assert len(chunks) >= 3 and all(len(c.text) <= MAX_CHARS for c in chunks)
    assert " ".join(c.text for c in chunks).split() == reply.split()
    assert stored[-1] == ("assistant", reply)


async def count_updates(served: ServedRobot) -> int:
    async with served.app.state.services.database.read() as conn:
        return int(
            (await conn.execute(select(func.count()).select_from(channel_updates))).scalar_one()
        )


async def kept(served: ServedRobot, message_id: str) -> bool:
    async with served.app.state.services.database.read() as conn:
        row = await conn.execute(
            select(channel_updates.c.id).where(channel_updates.c.platform_id == message_id)
        )
        return row.first() is not None
