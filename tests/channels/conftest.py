"""A fake Telegram Bot API server, and Tally serving a bot against it (the real
`python-telegram-bot` on both sides of our code)."""

from __future__ import annotations

import asyncio
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
from tests.conftest import make_settings, serve
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
