"""Platform bodies are input too (issue 30; docs/operations.md, reliability C, I): past a valid
secret or signature, every bad update a platform could send is recorded as refused and answered 200,
so the platform stops delivering it again; never a 500, never a turn; the bot answers the next good
update. A text with a NUL or a lone surrogate is answered, and stored storable.

The family is shared (`bad_updates.py`): a platform added later joins with one `Platform` entry
in `PLATFORMS`, and every probe runs against it on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.storage.tables import channel_updates
from tests.channels.bad_updates import Case, Platform, Served, cases
from tests.channels.conftest import (
    CLIENT_ID,
    ROBOT,
    SECRET,
    TOKEN,
    bot_settings,
    robot_settings,
    serving_bot,
    serving_robot,
    signed,
)
from tests.channels.discord_fixtures import DISCORD_TOKEN, serving_discord
from tests.channels.feishu_fixtures import APP_ID, feishu_settings, serving_feishu, webhook_call
from tests.channels.qq_fixtures import APP_SECRET as QQ_APP_SECRET
from tests.channels.qq_fixtures import serving_qq
from tests.channels.slack_fixtures import serving_slack, slack_settings
from tests.channels.slack_fixtures import signed as slack_signed
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.discord_server import FakeDiscordServer
from tests.fakes.feishu_server import FakeFeishuServer
from tests.fakes.qq_server import FakeQQServer, webhook_headers
from tests.fakes.slack_server import FakeSlackServer
from tests.fakes.telegram_server import FakeTelegramServer

FIGURE: dict[str, dict[str, int]] = {}


@pytest.fixture(scope="module", autouse=True)
def figure() -> Iterator[None]:
    yield
    for name, counts in FIGURE.items():
        print(
            f"\nbad updates, {name}: {counts['tried']} tried, {counts['survived']} survived "
            f"(refused or answered as expected), {counts['lost']} lost"
        )


# ---- Telegram ---------------------------------------------------------------------------------


@asynccontextmanager
async def telegram_bot(
    fake: FakeTelegramServer, tmp_path: Path, database_url: str
) -> AsyncIterator[Served]:
    bot = bot_settings(fake, mode="webhook")
    async with serving_bot(fake, tmp_path, database_url, bot=bot) as served:
        yield Served(
            served.app,
            served.client,
            replies=lambda: len(fake.sent(42, "sendMessage")),
            wait_replies=lambda n: served.sent(n),
        )


async def telegram_deliver(served: Served, body: bytes, n: int) -> httpx.Response:
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET, "Content-Type": "application/json"}
    return await served.client.post("/channels/default/tg", content=body, headers=headers)


def telegram_update(fake: FakeTelegramServer, text: str, n: int) -> dict[str, Any]:
    update = fake.user_message(text)
    update["update_id"] = 50_000 + n
    return update


# ---- DingTalk ---------------------------------------------------------------------------------


@asynccontextmanager
async def dingtalk_robot(
    fake: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> AsyncIterator[Served]:
    bot = robot_settings(fake, mode="callback")
    async with serving_robot(fake, tmp_path, database_url, bot=bot) as served:
        yield Served(
            served.app,
            served.client,
            replies=lambda: len(fake.sent()),
            wait_replies=lambda n: served.sent(n),
        )


async def dingtalk_deliver(served: Served, body: bytes, n: int) -> httpx.Response:
    # A fresh timestamp each (a signature seen with another message is a replay).
    headers = signed(int(time.time() * 1000) + n)
    return await served.client.post("/channels/default/dt", content=body, headers=headers)


def dingtalk_update(fake: FakeDingTalkServer, text: str, n: int) -> dict[str, Any]:
    message = fake.robot_message(text, robot_code=ROBOT)
    message["msgId"] = f"msg-bad-update-{n}"
    return message


# ---- QQ ----------------------------------------------------------------------------------------


@asynccontextmanager
async def qq_bot(fake: FakeQQServer, tmp_path: Path, database_url: str) -> AsyncIterator[Served]:
    async with serving_qq(fake, tmp_path, database_url) as served:
        yield Served(
            served.app,
            served.client,
            replies=lambda: len(fake.sent()),
            wait_replies=lambda n: served.sent(n),
        )


async def qq_deliver(served: Served, body: bytes, n: int) -> httpx.Response:
    # A fresh timestamp each: a body delivered again is QQ's redelivery, not a replay.
    headers = webhook_headers(QQ_APP_SECRET, body, int(time.time()) + n % 200)
    return await served.client.post("/channels/default/qb", content=body, headers=headers)


def qq_update(fake: FakeQQServer, text: str, n: int) -> dict[str, Any]:
    return fake.private_message(text)


# ---- Slack ------------------------------------------------------------------------------------


@asynccontextmanager
async def slack_bot(
    fake: FakeSlackServer, tmp_path: Path, database_url: str
) -> AsyncIterator[Served]:
    bot = slack_settings(fake, mode="events")
    async with serving_slack(fake, tmp_path, database_url, bot=bot) as served:
        yield Served(
            served.app,
            served.client,
            replies=lambda: len(fake.sent()),
            wait_replies=lambda n: served.sent(n),
        )


async def slack_deliver(served: Served, body: bytes, n: int) -> httpx.Response:
    headers = {**slack_signed(body), "Content-Type": "application/json"}
    return await served.client.post("/channels/default/sl", content=body, headers=headers)


def slack_update(fake: FakeSlackServer, text: str, n: int) -> dict[str, Any]:
    event = fake.event(text)
    event["event_id"] = f"EvBADUPDATE{n}"
    return event


# ---- Feishu -----------------------------------------------------------------------------------


@asynccontextmanager
async def feishu_bot(
    fake: FakeFeishuServer, tmp_path: Path, database_url: str
) -> AsyncIterator[Served]:
    bot = feishu_settings(fake, mode="webhook")
    async with serving_feishu(fake, tmp_path, database_url, bot=bot) as served:
        yield Served(
            served.app,
            served.client,
            replies=lambda: len(fake.sent()),
            wait_replies=lambda n: served.sent(n),
        )


async def feishu_deliver(served: Served, body: bytes, n: int) -> httpx.Response:
    # As Feishu posts it: encrypted with the app's key, then signed (a fresh nonce each).
    encrypted, headers = webhook_call(body)
    return await served.client.post("/channels/default/fs", content=encrypted, headers=headers)


def feishu_update(fake: FakeFeishuServer, text: str, n: int) -> dict[str, Any]:
    event = fake.message_event(text, app_id=APP_ID, token="feishu-verify-1")
    event["header"]["event_id"] = f"bad-update-{n}"
    return event


PLATFORMS = {
    "telegram": Platform(
        name="telegram",
        fake="telegram",
        serve=telegram_bot,
        deliver=telegram_deliver,
        update=telegram_update,
        integers=(
            ("update_id",),
            ("message", "message_id"),
            ("message", "date"),
            ("message", "chat", "id"),
            ("message", "from", "id"),
        ),
        ids=(("message", "chat", "type"),),
        text=("message", "text"),
    ),
    "dingtalk": Platform(
        name="dingtalk",
        fake="dingtalk",
        serve=dingtalk_robot,
        deliver=dingtalk_deliver,
        update=dingtalk_update,
        integers=(("sessionWebhookExpiredTime",), ("createAt",)),
        ids=(("msgId",), ("conversationId",)),
        text=("text", "content"),
    ),
    "qq": Platform(
        name="qq",
        fake="qq",
        serve=qq_bot,
        deliver=qq_deliver,
        update=qq_update,
        integers=(("op",),),
        ids=(("d", "id"), ("d", "author", "user_openid")),
        text=("d", "content"),
    ),
    "slack": Platform(
        name="slack",
        fake="slack",
        serve=slack_bot,
        deliver=slack_deliver,
        update=slack_update,
        integers=(("event_time",),),
        ids=(("event_id",), ("event", "channel")),
        text=("event", "text"),
    ),
    "feishu": Platform(
        name="feishu",
        fake="feishu",
        serve=feishu_bot,
        deliver=feishu_deliver,
        update=feishu_update,
        integers=(),  # Feishu sends its times as strings
        ids=(("header", "event_id"), ("event", "message", "message_id")),
        text=("event", "message", "content"),
    ),
}


async def stored_updates(served: Served) -> list[tuple[str, str, str | None]]:
    async with served.app.state.services.database.read() as conn:
        rows = await conn.execute(
            select(
                channel_updates.c.platform_id, channel_updates.c.status, channel_updates.c.error
            ).order_by(channel_updates.c.id)
        )
        return [(row.platform_id, row.status, row.error) for row in rows]


async def user_messages(served: Served) -> list[str]:
    sessions, _ = await served.app.state.services.sessions.list(tenant_id="default", limit=100)
    said = []
    for session in sessions:
        window = await served.app.state.services.messages.window(
            tenant_id="default", session_id=session.id, start_id=0, limit=100
        )
        said += [m.content for m in window if m.role == "user"]
    return said


@pytest.mark.parametrize("platform", list(PLATFORMS))
async def test_every_bad_update_is_refused_and_answered_never_a_500(
    platform: str, request: pytest.FixtureRequest, tmp_path: Path, database_url: str
) -> None:
    entry = PLATFORMS[platform]
    fake = request.getfixturevalue(entry.fake)
    probes = list(cases(entry, fake))
    answers: list[tuple[Case, httpx.Response]] = []
    async with entry.serve(fake, tmp_path, database_url) as served:
        for n, case in enumerate(probes):
            answers.append((case, await entry.deliver(served, case.body, n)))
        again = await entry.deliver(served, probes[0].body, len(probes))  # delivered again
        expected_replies = sum(case.expected == "answered" for case in probes) + 1
        good = json.dumps(entry.update(fake, "a good one after all that", 9_999)).encode()
        after = await entry.deliver(served, good, len(probes) + 1)
        await asyncio.wait_for(served.wait_replies(expected_replies), 120)
        health = await served.client.get("/api/health")
        updates = await stored_updates(served)
        said = await user_messages(served)

    wrong = [
        (case.name, answer.status_code, answer.text[:120])
        for case, answer in answers
        if answer.status_code != 200 or ("refused" in answer.json()) != (case.expected == "refused")
    ]
    refused = [u for u in updates if u[1] == "refused"]
    refused_cases = [c for c in probes if c.expected == "refused"]
    answered_cases = [c for c in probes if c.expected == "answered"]
    counts = FIGURE.setdefault(platform, {"tried": 0, "survived": 0, "lost": 0})
    counts["tried"] += len(probes)
    counts["survived"] += len(probes) - len(wrong)
    counts["lost"] += sum(c.said not in said for c in answered_cases)
    assert wrong == []
    assert again.status_code == 200 and after.status_code == 200
    assert len(refused) == len(refused_cases)  # each once: the one delivered again too
    assert all(error for _, _, error in refused)
    assert sorted(said) == sorted([c.said for c in answered_cases] + ["a good one after all that"])
    assert health.status_code == 200
    (bot,) = [c for c in health.json()["channels"] if c["kind"] == platform]
    assert bot["last_error"].startswith("refused update")


async def test_bad_polled_updates_are_refused_and_polling_goes_on(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    """Polling: the SDK would fail the whole batch at every poll; each is read on its own."""
    bad = [
        {"update_id": 901, "message": "a string"},
        {"update_id": 902, "message": {"message_id": 1, "date": float("inf"), "chat": 5}},
        {"update_id": 903, "message": {"message_id": 2, "date": 1, "chat": {"id": "x"}}},
    ]
    async with serving_bot(telegram, tmp_path, database_url) as served:
        for update in bad:
            telegram.push_update(TOKEN, update)
        telegram.push_update(TOKEN, telegram.user_message("still polling?"))
        (reply,) = await served.sent(1)
        updates = await stored_updates(served)  # type: ignore[arg-type]
    refused = [(platform_id, status) for platform_id, status, _ in updates if status == "refused"]
    count(FIGURE_POLLED, len(bad), len(refused))
    assert [p for p, _ in refused] == ["901", "902", "903"]
    assert reply.text == "Hello from Tally."


async def test_bad_stream_frames_are_refused_and_acknowledged(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    """Stream mode: an unacknowledged frame comes again and again; a refused one is acked."""
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        good = served.message("hello")
        bad_data = [
            json.dumps(good).replace(str(good["createAt"]), "1e400"),
            "[" * 5_000 + "]" * 5_000,
            "{not json",
            json.dumps({**served.message("x"), "msgId": {"an": "object"}}),
        ]
        frames = [await asyncio.to_thread(dingtalk.push_raw, CLIENT_ID, d) for d in bad_data]
        acks = [await served.acked(frame) for frame in frames]
        await served.push(good)
        (reply,) = await served.sent(1)
        updates = await stored_updates(served)  # type: ignore[arg-type]
    refused = [u for u in updates if u[1] == "refused"]
    count(FIGURE_STREAMED, len(bad_data), len(refused))
    assert [a["code"] for a in acks] == [200] * len(bad_data)
    assert len(refused) == len(bad_data)
    assert reply.text == "Hello from Tally."


FIGURE_POLLED = "telegram polling"
FIGURE_STREAMED = "dingtalk stream"


def count(name: str, tried: int, refused: int) -> None:
    counts = FIGURE.setdefault(name, {"tried": 0, "survived": 0, "lost": 0})
    counts["tried"] += tried
    counts["survived"] += min(tried, refused)


async def test_bad_discord_dispatches_are_refused_and_the_gateway_goes_on(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    """Discord has no webhook (its route answers 404 as for no bot: test_discord.py); its
    dispatches come over the gateway, read by discord.py as JSON. What reads as JSON but not as
    a message is refused and recorded; a frame that is no JSON at all costs the connection, and
    the bot connects again and answers the next message."""
    good = discord_fake.message("hello")
    bad = [
        {**discord_fake.message("x"), "id": 12},  # an id that is no string
        {**discord_fake.message("x"), "id": "9" * 30},  # no snowflake
        {**discord_fake.message("x"), "content": {"an": "object"}},
        {**discord_fake.message("x"), "author": None},
        {**discord_fake.message("x"), "type": 10**30},  # beyond ±2**63
        {**discord_fake.message("x"), "nonce": float("nan")},  # Python's json reads NaN
        {**discord_fake.message("x"), "embeds": [[[[[]]]]] * 3, "deep": _nested(40)},
    ]
    async with serving_discord(discord_fake, tmp_path, database_url) as served:
        for data in bad:
            await served.deliver(data)
        discord_fake.send_raw(DISCORD_TOKEN, "{not json")
        await asyncio.to_thread(discord_fake.wait_connected, DISCORD_TOKEN, 2)
        await served.deliver(good)
        (reply,) = await served.sent(1)
        updates = await stored_updates(served)  # type: ignore[arg-type]
    refused = [u for u in updates if u[1] == "refused"]
    count("discord gateway", len(bad), len(refused))
    assert len(refused) == len(bad) and all(error for _, _, error in refused)
    assert reply.content == "Hello from Tally."


def _nested(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value
