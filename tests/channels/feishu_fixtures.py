"""A fake Feishu, and Tally serving a Feishu bot against it (the real `lark-oapi` SDK's
long-connection client on our side), for the tests of tests/channels/, tests/crash/ and
tests/isolation/."""

from __future__ import annotations

import asyncio
import json
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
from tests.fakes.feishu_server import FakeFeishuServer, Sent, encrypted_body, signed_headers

APP_ID = "cli_test_app_1"
APP_SECRET = "feishu-secret-1"
ENCRYPT_KEY = "feishu-encrypt-key-1"
VERIFICATION_TOKEN = "feishu-verify-1"
PRIVATE_CHAT = "oc_p2p_ada"


@pytest.fixture
def feishu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFeishuServer]:
    monkeypatch.setenv("FS_APP_SECRET", APP_SECRET)
    monkeypatch.setenv("FS_ENCRYPT_KEY", ENCRYPT_KEY)
    monkeypatch.setenv("FS_VERIFY", VERIFICATION_TOKEN)
    with FakeFeishuServer() as server:
        server.add_app(APP_ID, APP_SECRET)
        yield server


def feishu_settings(fake: FakeFeishuServer, **overrides: Any) -> dict[str, Any]:
    return {
        "kind": "feishu",
        "app_id": APP_ID,
        "app_secret_env": "FS_APP_SECRET",
        "encrypt_key_env": "FS_ENCRYPT_KEY",
        "verification_token_env": "FS_VERIFY",
        "mode": "websocket",
        "allow_from": ["*"],
        "base_url": fake.base_url,
    } | overrides


def webhook_call(
    plain: bytes, *, key: str = ENCRYPT_KEY, timestamp: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """`plain` (an event's JSON) as Feishu posts it: encrypted, then signed."""
    body = encrypted_body(plain, key)
    return body, signed_headers(body, key, timestamp=timestamp)


@dataclass
class ServedFeishu:
    app: FastAPI
    client: httpx.AsyncClient
    fake: FakeFeishuServer
    provider: ScriptedProvider
    bot: str = "fs"

    def message(self, text: str = "", **fields: Any) -> dict[str, Any]:
        """A message from Ada in her private chat unless `fields` say otherwise."""
        return self.fake.message_event(text, app_id=APP_ID, token=VERIFICATION_TOKEN, **fields)

    def press(self, button: dict[str, Any], *, message_id: str, **fields: Any) -> dict[str, Any]:
        value = button["value"]
        return self.fake.card_action(
            value, app_id=APP_ID, message_id=message_id, token=VERIFICATION_TOKEN, **fields
        )

    async def push(self, event: dict[str, Any]) -> str:
        """Deliver `event` over the long connection; the frame's id."""
        return await asyncio.to_thread(self.fake.push, APP_ID, event)

    async def acked(self, frame_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.fake.wait_for_ack, frame_id)

    async def sent(self, count: int, reply_to: str | None = None) -> list[Sent]:
        return await asyncio.to_thread(self.fake.wait_for_sent, count, reply_to=reply_to)

    async def post(
        self, event: dict[str, Any] | bytes, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """Post `event` as Feishu's HTTP event subscription does (encrypted and signed)."""
        plain = event if isinstance(event, bytes) else json.dumps(event).encode()
        body, signed = webhook_call(plain)
        return await self.client.post(
            f"/channels/default/{self.bot}",
            content=body,
            headers=signed if headers is None else headers,
        )

    async def stored(self, chat: str = PRIVATE_CHAT) -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(
            tenant_id="default", channel="feishu", external_key=f"{self.bot}:{chat}"
        )
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id="default", session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]

    async def settle(self) -> None:
        await self.app.state.channels.get("default", self.bot).settle()


@asynccontextmanager
async def serving_feishu(
    fake: FakeFeishuServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    bot: dict[str, Any] | None = None,
    connected: bool = True,
    **sections: Any,
) -> AsyncIterator[ServedFeishu]:
    """Tally serving Feishu bot `fs`; over the long connection, once it is `connected`."""
    bot = bot or feishu_settings(fake)
    settings = make_settings(database_url, tmp_path, channels={"fs": bot}, **sections)
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        served = ServedFeishu(app, client, fake, provider)
        if connected and bot.get("mode", "websocket") == "websocket":
            await asyncio.to_thread(fake.wait_connected, APP_ID)
        yield served
