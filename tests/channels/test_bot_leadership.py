"""Bots with several processes on one PostgreSQL database: one process polls a Telegram bot (or
holds a DingTalk Stream connection), the leader; when it stops, another takes over. Webhooks
are taken by every process, and each update is answered once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.storage.channel_updates import ChannelUpdateRepository
from tests.channels.conftest import CLIENT_ID, SECRET, TOKEN, bot_settings, robot_settings
from tests.channels.slack_fixtures import slack_settings
from tests.conftest import make_settings, serve
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.slack_server import FakeSlackServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.waiting import until


class Process:
    """One app of several sharing the database, which a test may stop on its own."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient, stack: AsyncExitStack) -> None:
        self.app, self.client, self._stack = app, client, stack

    async def leading(self) -> bool:
        health = (await self.client.get("/api/health")).json()
        return any(bot["leading"] for bot in health["channels"])

    async def stop(self) -> None:
        await self._stack.aclose()


@asynccontextmanager
async def processes(
    count: int, postgres: str, tmp_path: Path, bot: dict[str, Any]
) -> AsyncIterator[list[Process]]:
    settings = make_settings(
        postgres,
        tmp_path,
        channels={"tg": bot} if bot["kind"] == "telegram" else {"dt": bot},
        memory={"store": "database"},
        coordination={"lease_s": 1},
    )
    started: list[Process] = []
    try:
        for _ in range(count):
            stack = AsyncExitStack()
            app = create_app(settings, provider=ScriptedProvider(replies=["Hello from Tally."] * 9))
            client = await stack.enter_async_context(serve(app))
            started.append(Process(app, client, stack))
        yield started
    finally:
        for process in started:
            await process.stop()


async def leaders(procs: list[Process]) -> list[Process]:
    return [p for p in procs if await p.leading()]


async def test_one_process_polls_a_telegram_bot_and_another_takes_over(
    telegram: FakeTelegramServer, postgres: str, tmp_path: Path
) -> None:
    async with processes(3, postgres, tmp_path, bot_settings(telegram)) as procs:
        await until(lambda: _count(leaders(procs), 1), "one leader")
        (leader,) = await leaders(procs)
        telegram.push_update(TOKEN, telegram.user_message("first"))
        await asyncio.to_thread(telegram.wait_for_sent, 1, chat_id=42)
        await leader.stop()
        rest = [p for p in procs if p is not leader]
        await until(lambda: _count(leaders(rest), 1), "a new leader")
        telegram.push_update(TOKEN, telegram.user_message("second"))
        sent = await asyncio.to_thread(telegram.wait_for_sent, 2, chat_id=42)
        assert len(await leaders(rest)) == 1  # never two pollers
    assert [s.text for s in sent] == ["Hello from Tally.", "Hello from Tally."]


async def test_every_process_takes_webhooks_and_each_update_is_answered_once(
    telegram: FakeTelegramServer, postgres: str, tmp_path: Path
) -> None:
    bot = bot_settings(telegram, mode="webhook")
    async with processes(2, postgres, tmp_path, bot) as procs:
        update = telegram.user_message("to both")
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        answers = await asyncio.gather(
            *(p.client.post("/channels/default/tg", json=update, headers=headers) for p in procs)
        )
        await asyncio.to_thread(telegram.wait_for_sent, 1, chat_id=42)
        for process in procs:
            await process.app.state.channels.get("default", "tg").settle()
    assert [a.status_code for a in answers] == [200, 200]
    assert len(telegram.sent(42, "sendMessage")) == 1


async def test_one_process_holds_a_dingtalk_stream_connection(
    dingtalk: FakeDingTalkServer, postgres: str, tmp_path: Path
) -> None:
    async with processes(2, postgres, tmp_path, robot_settings(dingtalk)) as procs:
        await until(lambda: _count(leaders(procs), 1), "one leader")
        await asyncio.to_thread(dingtalk.wait_open_links, CLIENT_ID, 1)
        (leader,) = await leaders(procs)
        await leader.stop()
        await asyncio.to_thread(dingtalk.wait_connected, CLIENT_ID, 2)  # the other connects
        await asyncio.to_thread(dingtalk.wait_open_links, CLIENT_ID, 1)


async def _count(found: Any, wanted: int) -> bool:
    return len(await found) == wanted


async def test_an_update_a_dead_process_had_in_hand_is_answered_by_a_live_one(
    telegram: FakeTelegramServer, postgres: str, tmp_path: Path
) -> None:
    bot = bot_settings(telegram, mode="webhook")
    async with processes(1, postgres, tmp_path, bot) as (live,):
        update = telegram.user_message("left behind")
        # What a process that died mid-answer leaves: kept, unanswered, its lease run out.
        await ChannelUpdateRepository(live.app.state.services.database).record(
            tenant_id="default",
            bot="tg",
            platform_id=str(update["update_id"]),
            payload=update,
            lease_s=-1,
        )
        (reply,) = await asyncio.to_thread(telegram.wait_for_sent, 1, chat_id=42)
    assert reply.text == "Hello from Tally."


async def test_one_process_holds_a_slack_socket_and_another_takes_over(
    slack: FakeSlackServer, postgres: str, tmp_path: Path
) -> None:
    async with processes(2, postgres, tmp_path, slack_settings(slack)) as procs:
        await until(lambda: _count(leaders(procs), 1), "one leader")
        await asyncio.to_thread(slack.wait_open_sockets, 1)
        (leader,) = await leaders(procs)
        await leader.stop()
        await asyncio.to_thread(slack.wait_connected, 2)  # the other connects
        await asyncio.to_thread(slack.wait_open_sockets, 1)
        await asyncio.to_thread(slack.push, slack.event("still there?"))
        (reply,) = await asyncio.to_thread(slack.wait_for_sent, 1)
    assert reply.text == "Hello from Tally."
