"""A Slack bot end to end: the real slack_sdk against a fake Slack, over Socket Mode (envelopes
acknowledged only once kept, a dropped socket reconnected) and the Events API (signed, fresh,
`url_verification` answered, Slack's retries answered once); turns stored exactly as a web
turn's, replies in the message's thread."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from backend.storage.tables import channel_updates
from tests.channels.slack_fixtures import ServedSlack, serving_slack
from tests.fakes.slack_server import FakeSlackServer


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


async def count_updates(served: ServedSlack) -> int:
    async with served.app.state.services.database.read() as conn:
        return int(
            (await conn.execute(select(func.count()).select_from(channel_updates))).scalar_one()
        )


async def kept(served: ServedSlack, platform_id: str) -> bool:
    async with served.app.state.services.database.read() as conn:
        row = await conn.execute(
            select(channel_updates.c.id).where(channel_updates.c.platform_id == platform_id)
        )
        return row.first() is not None
