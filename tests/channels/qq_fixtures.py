"""A fake QQ Bot Open Platform and Tally serving a QQ bot against it (webhook calls signed as
QQ signs them; or the websocket gateway)."""

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
from sqlalchemy import select

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import channel_updates
from tests.conftest import make_settings, serve
from tests.fakes.qq_server import FakeQQServer, Sent, webhook_headers

APP_ID = "102000001"
APP_SECRET = "naOC0ocQE3shWLAfffVLB1rhYPG7"


@pytest.fixture
def qq(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeQQServer]:
    monkeypatch.setenv("QQ_APP_SECRET", APP_SECRET)
    with FakeQQServer() as server:
        server.add_app(APP_ID, APP_SECRET)
        yield server


def qq_settings(qq: FakeQQServer, **overrides: Any) -> dict[str, Any]:
    return {
        "kind": "qq",
        "app_id": APP_ID,
        "app_secret_env": "QQ_APP_SECRET",
        "mode": "webhook",
        "allow_from": ["*"],
        "api_base_url": qq.base_url,
        "token_base_url": qq.base_url,
    } | overrides


@dataclass
class ServedQQ:
    app: FastAPI
    client: httpx.AsyncClient
    qq: FakeQQServer
    provider: ScriptedProvider
    bot: str = "qb"
    tenant: str = "default"

    async def deliver(
        self,
        event: dict[str, Any],
        headers: dict[str, str] | None = None,
        *,
        body: bytes | None = None,
        timestamp: int | None = None,
    ) -> httpx.Response:
        """Post `event` as QQ's webhook call, signed unless `headers` say otherwise."""
        raw = body if body is not None else json.dumps(event, ensure_ascii=False).encode()
        if headers is None:
            headers = webhook_headers(APP_SECRET, raw, timestamp)
        return await self.client.post(
            f"/channels/{self.tenant}/{self.bot}", content=raw, headers=headers
        )

    async def push(self, event: dict[str, Any]) -> int:
        """Deliver `event` over the websocket gateway; its sequence number."""
        return await asyncio.to_thread(self.qq.push, APP_ID, event)

    async def sent(self, count: int, target: str | None = None) -> list[Sent]:
        return await asyncio.to_thread(self.qq.wait_for_sent, count, target=target)

    async def stored(self, chat: str = "user-1") -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(
            tenant_id=self.tenant, channel="qq", external_key=f"{self.bot}:{chat}"
        )
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id=self.tenant, session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]

    async def updates(self) -> list[tuple[str, str]]:
        """(platform id, status) of every update kept (claimed proofs and seqs aside)."""
        async with self.app.state.services.database.read() as conn:
            rows = await conn.execute(
                select(channel_updates.c.platform_id, channel_updates.c.status)
                .where(channel_updates.c.status != "proof")
                .order_by(channel_updates.c.id)
            )
            return [(row.platform_id, row.status) for row in rows]

    async def settle(self) -> None:
        await self.app.state.channels.get(self.tenant, self.bot).settle()


@asynccontextmanager
async def serving_qq(
    qq: FakeQQServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    bot: dict[str, Any] | None = None,
    **sections: Any,
) -> AsyncIterator[ServedQQ]:
    """Tally serving QQ bot `qb`; in websocket mode, once it has identified."""
    bot = bot or qq_settings(qq)
    settings = make_settings(database_url, tmp_path, channels={"qb": bot}, **sections)
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        if bot.get("mode") == "websocket":
            await asyncio.to_thread(qq.wait_connected, APP_ID)
        yield ServedQQ(app, client, qq, provider)
