"""A Feishu bot end to end: the real `lark-oapi` SDK's long-connection client against a fake
Feishu (protobuf frames), and encrypted, signed HTTP events at `POST /channels/{tenant}/{bot}`;
turns stored exactly as a web turn's; every event answered once; replies in the thread of the
message they answer."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from sqlalchemy import func, select

from backend.channels.feishu.webhook import signature
from backend.storage.tables import channel_updates
from tests.channels.feishu_fixtures import (
    APP_ID,
    ENCRYPT_KEY,
    VERIFICATION_TOKEN,
    ServedFeishu,
    feishu_settings,
    serving_feishu,
    webhook_call,
)
from tests.fakes.feishu_server import FakeFeishuServer, encrypted_body, signed_headers

HOUR_S = 3600


def test_the_signature_is_the_one_feishu_computes() -> None:
    body = b'{"encrypt":"abc"}'
    feishus = signed_headers(body, "key", timestamp=1700000000, nonce="nonce")
    assert signature("1700000000", "nonce", "key", body) == feishus["X-Lark-Signature"]


async def test_websocket_a_message_in_a_reply_out_stored_as_a_web_turn(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        event = served.message("Hi there!")
        ack = await served.acked(await served.push(event))
        kept_when_acked = await kept(served, event["header"]["event_id"])
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert ack["code"] == 200 and "biz_rt" in ack["_headers"] and kept_when_acked
    assert reply.reply_to == event["event"]["message"]["message_id"]
    assert (reply.msg_type, reply.text) == ("post", "Hello from Tally.")
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]
    assert feishu.calls("token") == 1  # the tenant token is cached


async def test_a_frame_delivered_twice_is_acknowledged_twice_and_answered_once(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        event = served.message("once please")
        await served.acked(await served.push(event))
        await served.acked(await served.push(event))  # Feishu's redelivery: the same event_id
        await served.sent(1)
        await served.acked(await served.push(served.message("and then this")))
        await served.sent(2)
        stored = await served.stored()
    assert [text for role, text in stored if role == "user"] == ["once please", "and then this"]
    assert len(feishu.sent()) == 2


async def test_a_dropped_connection_reconnects_and_loses_no_message(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        await served.acked(await served.push(served.message("before")))
        feishu.drop_connections(APP_ID)
        await served.push(served.message("after the drop"))  # waits for the new connection
        await served.sent(2)
        stored = await served.stored()
    assert feishu.calls("endpoint") >= 2
    assert [text for role, text in stored if role == "user"] == ["before", "after the drop"]


async def test_webhook_a_message_in_a_reply_out_and_the_url_check_answered(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    bot = feishu_settings(feishu, mode="webhook")
    async with serving_feishu(feishu, tmp_path, database_url, bot=bot) as served:
        check = {"challenge": "ch-123", "token": VERIFICATION_TOKEN, "type": "url_verification"}
        body = encrypted_body(json.dumps(check).encode(), ENCRYPT_KEY)
        url_check = await served.client.post("/channels/default/fs", content=body)
        wrong = encrypted_body(json.dumps(check | {"token": "nope"}).encode(), ENCRYPT_KEY)
        wrong_check = await served.client.post("/channels/default/fs", content=wrong)
        event = served.message("Hello by webhook")
        answer = await served.post(event)
        (reply,) = await served.sent(1)
        again = await served.post(event)  # Feishu's retry, signed afresh: answered once
        await served.settle()
        stored = await served.stored()
    assert url_check.status_code == 200 and url_check.json() == {"challenge": "ch-123"}
    assert wrong_check.status_code == 401
    assert answer.status_code == 200 and again.status_code == 200
    assert reply.text == "Hello from Tally."
    assert stored == [("user", "Hello by webhook"), ("assistant", "Hello from Tally.")]
    assert len(feishu.sent()) == 1


async def test_webhook_events_are_checked_signed_fresh_and_once(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    bot = feishu_settings(feishu, mode="webhook")
    async with serving_feishu(feishu, tmp_path, database_url, bot=bot) as served:
        plain = json.dumps(served.message("forged")).encode()
        body, headers = webhook_call(plain)
        forged = await served.post(plain, {**headers, "X-Lark-Signature": "0" * 64})
        unsigned = await served.client.post("/channels/default/fs", content=body)
        stale_body, stale = webhook_call(plain, timestamp=int(time.time()) - 2 * HOUR_S)
        stale_answer = await served.client.post(
            "/channels/default/fs", content=stale_body, headers=stale
        )
        other_key = await served.client.post(
            "/channels/default/fs", content=webhook_call(plain, key="not-ours")[0], headers=headers
        )
        wrong_token = served.message("wrong token")
        wrong_token["header"]["token"] = "not-the-token"
        bad_token = await served.post(wrong_token)
        rows = await count_updates(served)

        good_body, good_headers = webhook_call(json.dumps(served.message("real")).encode())
        good = await served.client.post(
            "/channels/default/fs", content=good_body, headers=good_headers
        )
        await served.sent(1)
        replay = await served.client.post(
            "/channels/default/fs", content=good_body, headers=good_headers
        )
        await served.settle()
        stored = await served.stored()
    answers = [forged, unsigned, stale_answer, other_key]
    assert [a.status_code for a in answers] == [401] * 4
    assert "an hour" in stale_answer.json()["error"]["message"]
    assert bad_token.status_code == 200 and "verification token" in bad_token.json()["refused"]
    assert rows == 1  # that one, signed, is recorded as refused: the others are not Feishu's
    assert good.status_code == 200 and replay.status_code == 401
    assert [text for role, text in stored if role == "user"] == ["real"]
    assert len(feishu.sent()) == 1


async def test_a_websocket_bot_takes_no_webhook_events(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        answer = await served.post(served.message("hello?"))
    assert answer.status_code == 404


async def count_updates(served: ServedFeishu) -> int:
    async with served.app.state.services.database.read() as conn:
        return int(
            (await conn.execute(select(func.count()).select_from(channel_updates))).scalar_one()
        )


async def kept(served: ServedFeishu, event_id: str) -> bool:
    async with served.app.state.services.database.read() as conn:
        row = await conn.execute(
            select(channel_updates.c.id).where(channel_updates.c.platform_id == event_id)
        )
        return row.first() is not None


async def test_bad_frames_are_refused_and_acknowledged_and_the_next_answered(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    """An unacknowledged frame comes again and again; a refused one is acknowledged."""
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        good = served.message("hello")
        no_id = served.message("x")
        no_id["header"]["event_id"] = {"an": "object"}
        bad = [b"{not json", b"[" * 5_000 + b"]" * 5_000, json.dumps(no_id).encode()]
        frames = [await asyncio.to_thread(feishu.push_raw, APP_ID, body) for body in bad]
        acks = [await served.acked(frame) for frame in frames]
        await served.push(good)
        (reply,) = await served.sent(1)
        rows = await count_updates(served)
    assert [a["code"] for a in acks] == [200] * len(bad)
    assert rows == len(bad) + 1
    assert reply.text == "Hello from Tally."
