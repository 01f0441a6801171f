"""Tally serving a WeCom self-built app against the fake WeCom (`tests/fakes/wecom_server.py`):
the app's settings, and callbacks posted as WeCom posts them. The `wecom` fixture is in
`tests/channels/conftest.py`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.fakes.wecom_robot_server import FakeRobotServer, Reply
from tests.fakes.wecom_server import App, FakeWeComServer, Sent

# WeCom's documented sample (developer.work.weixin.qq.com/document/path/90968): its corp id,
# Token and EncodingAESKey, so the known-answer test and the fake use the same app.
CORP_ID = "wx5823bf96d3bd56c7"
TOKEN = "QDG6eK"
AES_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
APP = App(corp_id=CORP_ID, agent_id=1000002, secret="wecom-secret-1", token=TOKEN, aes_key=AES_KEY)


def running_wecom(monkeypatch: pytest.MonkeyPatch, app: App = APP) -> Iterator[FakeWeComServer]:
    monkeypatch.setenv("WC_SECRET", app.secret)
    monkeypatch.setenv("WC_TOKEN", app.token)
    monkeypatch.setenv("WC_AES_KEY", app.aes_key)
    with FakeWeComServer() as server:
        server.add_app(app)
        yield server


def app_settings(wecom: FakeWeComServer, app: App = APP, **overrides: Any) -> dict[str, Any]:
    return {
        "kind": "wecom",
        "mode": "app",
        "corp_id": app.corp_id,
        "agent_id": app.agent_id,
        "secret_env": "WC_SECRET",
        "token_env": "WC_TOKEN",
        "aes_key_env": "WC_AES_KEY",
        "allow_from": ["*"],
        "api_base_url": wecom.base_url,
    } | overrides


@dataclass
class ServedApp:
    app: FastAPI
    client: httpx.AsyncClient
    wecom: FakeWeComServer
    provider: ScriptedProvider
    path: str = "/channels/default/wc"

    def message(self, text: str = "", **fields: Any) -> bytes:
        """A message from Ada to the app, as WeCom's plaintext XML."""
        return self.wecom.message_xml(text, app=APP, **fields)

    async def post(self, plaintext: bytes, **signing: Any) -> httpx.Response:
        """`plaintext` posted as WeCom's callback: encrypted and signed (unless told otherwise)."""
        query, body = self.wecom.callback(APP, plaintext, **signing)
        return await self.client.post(self.path, params=query, content=body)

    async def sent(self, count: int, to_user: str | None = "ada") -> list[Sent]:
        return await asyncio.to_thread(self.wecom.wait_for_sent, count, to_user=to_user)

    async def stored(self, user: str = "ada") -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(tenant_id="default", channel="wecom", external_key=f"wc:{user}")
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id="default", session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]

    async def settle(self) -> None:
        await self.app.state.channels.get("default", "wc").settle()


@asynccontextmanager
async def serving_app(
    wecom: FakeWeComServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    bot: dict[str, Any] | None = None,
    **sections: Any,
) -> AsyncIterator[ServedApp]:
    settings = make_settings(
        database_url, tmp_path, channels={"wc": bot or app_settings(wecom)}, **sections
    )
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        yield ServedApp(app, client, wecom, provider)


# ---- the intelligent robot ---------------------------------------------------------------------

BOT_ID = "aibot-test-1"
BOT_SECRET = "aibot-secret-1"


def running_robot(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRobotServer]:
    monkeypatch.setenv("WC_BOT_SECRET", BOT_SECRET)
    with FakeRobotServer(BOT_ID, BOT_SECRET) as server:
        yield server


def robot_settings(robot: FakeRobotServer, **overrides: Any) -> dict[str, Any]:
    return {
        "kind": "wecom",
        "mode": "robot",
        "bot_id": BOT_ID,
        "bot_secret_env": "WC_BOT_SECRET",
        "allow_from": ["*"],
        "ws_url": robot.url,
    } | overrides


@dataclass
class ServedRobot:
    app: FastAPI
    client: httpx.AsyncClient
    robot: FakeRobotServer
    provider: ScriptedProvider

    async def push(self, frame: dict[str, Any] | str) -> None:
        await asyncio.to_thread(self.robot.push, frame)

    async def replies(self, count: int) -> list[Reply]:
        return await asyncio.to_thread(self.robot.wait_for_replies, count)

    async def stored(self, chat: str = "ada") -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(tenant_id="default", channel="wecom", external_key=f"wr:{chat}")
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id="default", session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]

    async def settle(self) -> None:
        await self.app.state.channels.get("default", "wr").settle()


@asynccontextmanager
async def serving_robot(
    robot: FakeRobotServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    bot: dict[str, Any] | None = None,
    connected: bool = True,
    **sections: Any,
) -> AsyncIterator[ServedRobot]:
    """Tally serving robot `wr`, once it subscribed (unless told not to wait)."""
    settings = make_settings(
        database_url, tmp_path, channels={"wr": bot or robot_settings(robot)}, **sections
    )
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        if connected:
            await asyncio.to_thread(robot.wait_connected)
        yield ServedRobot(app, client, robot, provider)
