"""A Slack bot end to end: the real slack_sdk against a fake Slack, over Socket Mode (envelopes
acknowledged only once kept, a dropped socket reconnected) and the Events API (signed, fresh,
`url_verification` answered, Slack's retries answered once); turns stored exactly as a web
turn's, replies in the message's thread."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from backend.channels.slack.format import MAX_CHARS
from backend.storage.tables import channel_updates
from tests.channels.slack_fixtures import ServedSlack, serving_slack, signed, slack_settings
from tests.fakes.slack_server import FakeSlackServer
from tests.waiting import until


async def test_socket_mode_a_message_in_a_reply_out_stored_as_a_web_turn(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        event = slack.event("Hi there!")
        await served.acked(await served.push(event))
        kept_when_acked = await kept(served, event["event_id"])
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert kept_when_acked
    assert (reply.channel, reply.text, reply.thread_ts) == ("D0ADA", "Hello from Tally.", None)
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]
    assert slack.calls("apps.connections.open") == 1


async def test_an_envelope_delivered_twice_is_acknowledged_twice_and_answered_once(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        event = slack.event("once please")
        await served.acked(await served.push(event))
        await served.acked(await served.push(event))  # Slack's retry: the same event_id
        await served.sent(1)
        await served.acked(await served.push(slack.event("and then this")))
        await served.sent(2)
        stored = await served.stored()
    assert [text for role, text in stored if role == "user"] == ["once please", "and then this"]
    assert len(slack.sent()) == 2


async def test_a_dropped_socket_reconnects_and_loses_no_message(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        await served.acked(await served.push(slack.event("before")))
        await served.sent(1)
        slack.drop_sockets()
        after = await served.push(slack.event("after the drop"))  # waits for the new socket
        await served.acked(after)
        await served.sent(2)
        slack.push_disconnect()  # Slack's notice: a new socket, from a new URL
        await served.acked(await served.push(slack.event("after the refresh")))
        await served.sent(3)
        stored = await served.stored()
    assert [text for role, text in stored if role == "user"] == [
        "before",
        "after the drop",
        "after the refresh",
    ]
    assert slack.opened >= 3 and slack.calls("apps.connections.open") >= 3


async def test_events_api_checks_signed_fresh_and_answers_retries_once(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    bot = slack_settings(slack, mode="events")
    async with serving_slack(slack, tmp_path, database_url, bot=bot) as served:
        challenge = await served.post(
            {"token": "x", "challenge": "ch-123", "type": "url_verification"}
        )
        event = slack.event("Hello by HTTP")
        body = json.dumps(event).encode()
        forged = await served.post(event, {**signed(body), "X-Slack-Signature": "v0=00"})
        unsigned = await served.post(event, {})
        stale = await served.post(event, signed(body, at=time.time() - 6 * 60))
        other_secret = await served.post(event, signed(body, secret="not-ours"))
        refused_rows = await count_updates(served)

        good = await served.post(event)
        (reply,) = await served.sent(1)
        retry = await served.post(event, retry=1)  # a new signature
        replay = await served.post(event, signed(body, at=time.time() - 10 * 60))
        await served.settle()
        stored = await served.stored()
    assert challenge.status_code == 200 and challenge.json() == {"challenge": "ch-123"}
    assert [r.status_code for r in (forged, unsigned, stale, other_secret)] == [401] * 4
    assert "five minutes" in stale.json()["error"]["message"]
    assert refused_rows == 0
    assert good.status_code == 200 and reply.text == "Hello from Tally."
    assert retry.status_code == 200 and replay.status_code == 401
    assert stored == [("user", "Hello by HTTP"), ("assistant", "Hello from Tally.")]
    assert len(slack.sent()) == 1


async def test_a_body_that_is_no_slack_event_is_recorded_as_refused_and_answered(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    bot = slack_settings(slack, mode="events")
    async with serving_slack(slack, tmp_path, database_url, bot=bot) as served:
        not_json = await served.client.post(
            "/channels/default/sl", content=b"{nope", headers=signed(b"{nope")
        )
        no_id = await served.post({"type": "event_callback", "event": {"type": "message"}})
        rows = await count_updates(served)
    assert (not_json.status_code, no_id.status_code) == (200, 200)
    assert "not JSON" in not_json.json()["refused"] and "event_id" in no_id.json()["refused"]
    assert rows == 2


async def test_a_socket_mode_bot_takes_no_events_api_calls(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        answer = await served.post(slack.event("hello?"))
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


async def test_in_a_channel_the_reply_goes_in_the_thread_of_the_mention(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        mention = slack.event("<@UBOT> what is up?", channel="C0TEAM", kind="app_mention")
        same_as_message = slack.event("<@UBOT> what is up?", channel="C0TEAM")
        in_thread = slack.event(
            "<@UBOT> and here?", channel="C0TEAM", kind="app_mention", thread_ts="1700000000.000001"
        )
        for payload in (same_as_message, mention, in_thread):
            await served.acked(await served.push(payload))
        first, second = await served.sent(2)
        await served.settle()
        stored = await served.stored("C0TEAM")
    assert (first.channel, first.thread_ts) == ("C0TEAM", mention["event"]["ts"])
    assert second.thread_ts == "1700000000.000001"
    assert [text for role, text in stored if role == "user"] == ["what is up?", "and here?"]
    assert len(slack.sent()) == 2  # the plain `message` event of the mention is not answered


async def test_a_long_reply_arrives_in_ordered_chunks_within_the_limit(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    paragraphs = [f"Paragraph {n}: " + "words " * 170 for n in range(10)]
    reply = "\n\n".join(paragraphs)
    assert len(reply) >= 10_000
    async with serving_slack(slack, tmp_path, database_url) as served:
        served.provider.push(reply)
        await served.acked(await served.push(slack.event("tell me a lot")))
        await served.settle()
        chunks = slack.sent()
        stored = await served.stored()
    assert len(chunks) >= 3 and all(len(c.text) <= MAX_CHARS for c in chunks)
    assert " ".join(c.text for c in chunks).split() == reply.split()
    assert stored[-1] == ("assistant", reply)


async def test_slacks_rate_limit_is_waited_out(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url) as served:
        slack.rate_limit_next("chat.postMessage", retry_after_s=1)
        await served.acked(await served.push(slack.event("busy?")))
        (reply,) = await served.sent(1)
    assert reply.text == "Hello from Tally."
    assert slack.calls("chat.postMessage") == 2


async def test_bad_envelopes_are_refused_acknowledged_and_the_socket_goes_on(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    """An unacknowledged envelope comes again and again: a refused one is acknowledged."""
    bad: list[Any] = [
        {"type": "event_callback", "event_id": {"an": "object"}, "event": {}},
        {"type": "no_such_thing"},
        {**slack.event("x"), "event_time": 1.5},
        [1, 2],
    ]
    async with serving_slack(slack, tmp_path, database_url) as served:
        for payload in bad:
            await served.acked(await served.push(payload))
        await served.acked(await served.push(slack.event("still here?")))
        (reply,) = await served.sent(1)
        refused = await count_updates(served, "refused")
    assert refused == len(bad) and reply.text == "Hello from Tally."


async def test_a_refused_app_token_shows_in_the_status_and_nothing_connects(
    slack: FakeSlackServer, tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-revoked")
    async with serving_slack(slack, tmp_path, database_url, wait_connected=False) as served:

        async def refused() -> bool:
            health = (await served.client.get("/api/health")).json()
            (bot,) = health["channels"]
            return "invalid_auth" in (bot["last_error"] or "") and not bot["connected"]

        await until(refused, "the refused app token in the bot's status")  # type: ignore[arg-type]
    assert slack.opened == 0 and slack.calls("apps.connections.open") >= 1


async def count_updates(served: ServedSlack, status: str | None = None) -> int:
    query = select(func.count()).select_from(channel_updates)
    if status is not None:
        query = query.where(channel_updates.c.status == status)
    async with served.app.state.services.database.read() as conn:
        return int((await conn.execute(query)).scalar_one())


async def kept(served: ServedSlack, platform_id: str) -> bool:
    async with served.app.state.services.database.read() as conn:
        row = await conn.execute(
            select(channel_updates.c.id).where(channel_updates.c.platform_id == platform_id)
        )
        return row.first() is not None
