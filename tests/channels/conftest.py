"""Fake chat platforms (Telegram's Bot API; DingTalk's gateway, OpenAPI and session webhooks),
and Tally serving a bot against each (the real `python-telegram-bot` and `dingtalk-stream` on
our side)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.providers.base import ChatProvider
from backend.providers.scripted import ScriptedProvider
from tests.channels import slack_fixtures
from tests.conftest import make_settings, serve
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.dingtalk_server import Sent as DingTalkSent
from tests.fakes.slack_server import FakeSlackServer
from tests.fakes.telegram_server import FakeTelegramServer, Sent

TOKEN = "123456:test-token"
SECRET = "webhook-secret_1"


@pytest.fixture
def telegram(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTelegramServer]:
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    monkeypatch.setenv("TG_SECRET", SECRET)
    with FakeTelegramServer() as server:
        server.add_bot(TOKEN, username="tally_test_bot")
        yield server


def bot_settings(telegram: FakeTelegramServer, **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "kind": "telegram",
        "token_env": "TG_TOKEN",
        "mode": "polling",
        "allow_from": ["*"],
        "api_base_url": telegram.base_url,
        "poll_timeout_s": 1,
    }
    if overrides.get("mode") == "webhook":
        settings |= {
            "webhook_url": "https://bots.example.com/tg",
            "webhook_secret_env": "TG_SECRET",
        }
    return settings | overrides


@dataclass
class Served:
    app: FastAPI
    client: httpx.AsyncClient
    telegram: FakeTelegramServer
    provider: ScriptedProvider

    async def sent(
        self, count: int, *, chat_id: int = 42, method: str = "sendMessage"
    ) -> list[Sent]:
        """Until the bot sent `count` of `method` to `chat_id` (the server runs in a thread)."""
        return await asyncio.to_thread(
            self.telegram.wait_for_sent, count, chat_id=chat_id, method=method
        )

    async def until(self, condition: Callable[[FakeTelegramServer], bool], what: str) -> None:
        await asyncio.to_thread(self.telegram.wait_until, condition, what=what)

    async def deliver(
        self, update: dict[str, Any], *, secret: str | None = SECRET
    ) -> httpx.Response:
        headers = {} if secret is None else {"X-Telegram-Bot-Api-Secret-Token": secret}
        return await self.client.post("/channels/default/tg", json=update, headers=headers)

    async def stored(self) -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(tenant_id="default", channel="telegram", external_key="tg:42")
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id="default", session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]


@asynccontextmanager
async def serving_bot(
    telegram: FakeTelegramServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    summarizer: ChatProvider | None = None,
    bot: dict[str, Any] | None = None,
    **sections: Any,
) -> AsyncIterator[Served]:
    settings = make_settings(
        database_url, tmp_path, channels={"tg": bot or bot_settings(telegram)}, **sections
    )
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider, summarizer_provider=summarizer)
    async with serve(app) as client:
        yield Served(app, client, telegram, provider)


# ---- DingTalk -----------------------------------------------------------------------------------

CLIENT_ID = "ding-client-1"
CLIENT_SECRET = "ding-secret-1"
ROBOT = "ding-robot-1"


@pytest.fixture
def dingtalk(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDingTalkServer]:
    monkeypatch.setenv("DT_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("DT_CLIENT_SECRET", CLIENT_SECRET)
    with FakeDingTalkServer() as server:
        server.add_app(CLIENT_ID, CLIENT_SECRET, ROBOT)
        yield server


def robot_settings(dingtalk: FakeDingTalkServer, **overrides: Any) -> dict[str, Any]:
    return {
        "kind": "dingtalk",
        "client_id_env": "DT_CLIENT_ID",
        "client_secret_env": "DT_CLIENT_SECRET",
        "robot_code": ROBOT,
        "mode": "stream",
        "allow_from": ["*"],
        "openapi_base_url": dingtalk.base_url,
    } | overrides


def signed(timestamp_ms: int | None = None, secret: str = CLIENT_SECRET) -> dict[str, str]:
    """The headers DingTalk signs a callback with (computed here, as DingTalk does)."""
    timestamp = str(timestamp_ms if timestamp_ms is not None else int(time.time() * 1000))
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256)
    return {"timestamp": timestamp, "sign": base64.b64encode(digest.digest()).decode()}


@dataclass
class ServedRobot:
    app: FastAPI
    client: httpx.AsyncClient
    dingtalk: FakeDingTalkServer
    provider: ScriptedProvider

    def message(self, text: str = "", **fields: Any) -> dict[str, Any]:
        """A robot message from Ada (private) unless `fields` say otherwise."""
        return self.dingtalk.robot_message(text, robot_code=ROBOT, **fields)

    async def push(self, message: dict[str, Any]) -> str:
        """Deliver `message` over the Stream connection; the frame's id."""
        return await asyncio.to_thread(self.dingtalk.push, CLIENT_ID, message)

    async def acked(self, frame_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.dingtalk.wait_for_ack, frame_id)

    async def sent(self, count: int, target: str | None = None) -> list[DingTalkSent]:
        return await asyncio.to_thread(self.dingtalk.wait_for_sent, count, target=target)

    async def callback(
        self, message: dict[str, Any], headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """Post `message` as DingTalk's HTTP callback, signed unless `headers` say otherwise."""
        return await self.client.post(
            "/channels/default/dt",
            content=json.dumps(message),
            headers=signed() if headers is None else headers,
        )

    async def stored(self, conversation: str = "cid-private-1") -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(
            tenant_id="default", channel="dingtalk", external_key=f"dt:{conversation}"
        )
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id="default", session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]

    async def settle(self) -> None:
        await self.app.state.channels.get("default", "dt").settle()


@asynccontextmanager
async def serving_robot(
    dingtalk: FakeDingTalkServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    bot: dict[str, Any] | None = None,
    connected: bool = True,
    **sections: Any,
) -> AsyncIterator[ServedRobot]:
    """Tally serving robot `dt`; in Stream mode, once it is `connected` (unless told not to
    wait: a test of a gateway that never lets it connect)."""
    settings = make_settings(
        database_url, tmp_path, channels={"dt": bot or robot_settings(dingtalk)}, **sections
    )
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        served = ServedRobot(app, client, dingtalk, provider)
        if connected and (bot or {}).get("mode", "stream") == "stream":
            await asyncio.to_thread(dingtalk.wait_connected, CLIENT_ID)
        yield served


# ---- Discord (tests/channels/discord_fixtures.py) ----------------------------------------------
from tests.channels.discord_fixtures import discord_fake  # noqa: E402, F401
from tests.channels.qq_fixtures import qq  # noqa: E402, F401  # the fake QQ, for every test here

# ---- Slack (tests/channels/slack_fixtures.py) ---------------------------------------------------


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlackServer]:
    yield from slack_fixtures.fake_slack(monkeypatch)


# ---- WeCom (helpers in tests/channels/wecom_fixtures.py) ----------------------------------------


@pytest.fixture
def wecom(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from tests.channels.wecom_fixtures import running_wecom

    yield from running_wecom(monkeypatch)


@pytest.fixture
def wecom_robot(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from tests.channels.wecom_fixtures import running_robot

    yield from running_robot(monkeypatch)


from tests.channels.feishu_fixtures import feishu  # noqa: E402, F401  # the Feishu fixture
