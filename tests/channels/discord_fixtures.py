"""A fake Discord and Tally serving a bot against it (the real discord.py on our side)."""

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
from backend.providers.base import ChatProvider
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.fakes.discord_server import FakeDiscordServer, Sent

DISCORD_TOKEN = "discord-bot-token-1"
BOT_ID = "800000000000000001"
DM = "300"  # the direct-message channel of the fake's messages
GUILD = "700"
GUILD_CHANNEL = "310"


@pytest.fixture
def discord_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDiscordServer]:
    monkeypatch.setenv("DISCORD_TOKEN", DISCORD_TOKEN)
    with FakeDiscordServer() as server:
        server.add_bot(DISCORD_TOKEN, user_id=BOT_ID, username="tally")
        yield server


def discord_settings(fake: FakeDiscordServer, **overrides: Any) -> dict[str, Any]:
    return {
        "kind": "discord",
        "token_env": "DISCORD_TOKEN",
        "allow_from": ["*"],
        "api_base_url": fake.api_base_url,
        "gateway_url": fake.gateway_url,
    } | overrides


def mention(user_id: str = BOT_ID) -> dict[str, Any]:
    return {"id": user_id, "username": "tally", "discriminator": "0", "avatar": None, "bot": True}


@dataclass
class ServedDiscord:
    app: FastAPI
    client: httpx.AsyncClient
    fake: FakeDiscordServer
    provider: ScriptedProvider
    token: str = DISCORD_TOKEN

    def message(self, text: str, **fields: Any) -> dict[str, Any]:
        return self.fake.message(text, **fields)

    async def deliver(self, data: dict[str, Any], event: str = "MESSAGE_CREATE") -> int:
        return await asyncio.to_thread(self.fake.dispatch, self.token, event, data)

    async def sent(self, count: int, channel_id: str | None = DM) -> list[Sent]:
        return await asyncio.to_thread(
            self.fake.wait_for_sent, count, channel_id=channel_id, token=self.token
        )

    async def stored(self, channel_id: str = DM, bot: str = "dc") -> list[tuple[str, str]]:
        sessions = self.app.state.services.sessions
        found = await sessions.find(
            tenant_id="default", channel="discord", external_key=f"{bot}:{channel_id}"
        )
        if found is None:
            return []
        messages = await self.app.state.services.messages.window(
            tenant_id="default", session_id=found.id, start_id=0, limit=100
        )
        return [(m.role, m.content) for m in messages]

    async def settle(self, bot: str = "dc") -> None:
        await self.app.state.channels.get("default", bot).settle()


@asynccontextmanager
async def serving_discord(
    fake: FakeDiscordServer,
    tmp_path: Path,
    database_url: str,
    *,
    provider: ScriptedProvider | None = None,
    summarizer: ChatProvider | None = None,
    bot: dict[str, Any] | None = None,
    connected: bool = True,
    **sections: Any,
) -> AsyncIterator[ServedDiscord]:
    """Tally serving Discord bot `dc`, once its gateway connection is up (unless told not to
    wait: a test of a Discord that refuses it)."""
    settings = make_settings(
        database_url, tmp_path, channels={"dc": bot or discord_settings(fake)}, **sections
    )
    provider = provider or ScriptedProvider(replies=["Hello from Tally."])
    app = create_app(settings, provider=provider, summarizer_provider=summarizer)
    async with serve(app) as client:
        if connected:
            await asyncio.to_thread(fake.wait_connected, DISCORD_TOKEN)
        yield ServedDiscord(app, client, fake, provider)
