"""A Discord that will not have the bot: a token it refuses, a privileged intent the Developer
Portal has not allowed. Each is shown in the bot's health and retried with backoff; the bot
connects once Discord lets it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.channels.discord_fixtures import (
    DISCORD_TOKEN,
    ServedDiscord,
    discord_settings,
    serving_discord,
)
from tests.fakes.discord_server import FakeDiscordServer
from tests.waiting import until


async def health(served: ServedDiscord) -> dict[str, object]:
    answer = await served.client.get("/api/health")
    (bot,) = [c for c in answer.json()["channels"] if c["bot"] == "dc"]
    return dict(bot)


async def wait_for_error(served: ServedDiscord, what: str) -> dict[str, object]:
    async def failed() -> dict[str, object] | None:
        status = await health(served)
        return status if what in str(status["last_error"] or "") else None

    return await until(failed, f"a {what} error in the bot's health", poll_s=0.01)


async def test_a_token_discord_refuses_is_shown_and_nothing_connects(
    discord_fake: FakeDiscordServer,
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STALE_TOKEN", "reset-in-the-portal")
    bot = discord_settings(discord_fake, token_env="STALE_TOKEN")
    async with serving_discord(
        discord_fake, tmp_path, database_url, bot=bot, connected=False
    ) as served:
        status = await wait_for_error(served, "LoginFailure")
    assert str(status["last_error"]).startswith("connect: LoginFailure")
    assert status["connected"] is False
    assert discord_fake.identifies == []


@pytest.mark.slow
async def test_a_missing_message_content_intent_is_shown_and_retried_until_allowed(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    discord_fake.intents_refused.add(DISCORD_TOKEN)
    async with serving_discord(discord_fake, tmp_path, database_url, connected=False) as served:
        status = await wait_for_error(served, "PrivilegedIntentsRequired")
        discord_fake.intents_refused.clear()  # allowed in the Developer Portal
        await asyncio.to_thread(discord_fake.wait_connected, DISCORD_TOKEN)
        await served.deliver(served.message("there now?"))
        (reply,) = await served.sent(1)
    assert str(status["last_error"]).startswith("gateway: PrivilegedIntentsRequired")
    assert reply.content == "Hello from Tally."


async def test_without_the_intent_setting_it_is_not_asked_for(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    discord_fake.intents_refused.add(DISCORD_TOKEN)
    bot = discord_settings(discord_fake, message_content_intent=False)
    async with serving_discord(discord_fake, tmp_path, database_url, bot=bot) as served:
        await served.deliver(served.message("hello"))  # a direct message carries its text
        (reply,) = await served.sent(1)
    assert reply.content == "Hello from Tally."
