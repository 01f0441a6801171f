"""Discord bots set through the admin API: a tenant created with a bot has it on the gateway at
once, disabling the tenant closes its connection and enabling it connects again, and a bot that
could not run (its token unset, or another bot's token) is refused (422) before anything is
stored."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_auth import ADMIN_KEY, bearer
from tests.channels.discord_fixtures import (
    DISCORD_TOKEN,
    ServedDiscord,
    discord_settings,
    serving_discord,
)
from tests.fakes.discord_server import FakeDiscordServer

OPERATOR = bearer(ADMIN_KEY)
ACME_TOKEN = "acme-discord-token"
ACME_BOT = "800000000000000002"


@pytest.fixture(autouse=True)
def keys_mode(monkeypatch: pytest.MonkeyPatch, discord_fake: FakeDiscordServer) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("ACME_DISCORD_TOKEN", ACME_TOKEN)
    discord_fake.add_bot(ACME_TOKEN, user_id=ACME_BOT, username="acme")


def acme_bot(fake: FakeDiscordServer, **overrides: Any) -> dict[str, Any]:
    return discord_settings(fake, **{"token_env": "ACME_DISCORD_TOKEN"} | overrides)


async def bots(served: ServedDiscord) -> list[tuple[str, str, str]]:
    health = (await served.client.get("/api/health", headers=OPERATOR)).json()
    return sorted((bot["tenant_id"], bot["bot"], bot["mode"]) for bot in health["channels"])


async def patch_acme(served: ServedDiscord, **body: Any) -> None:
    patched = await served.client.patch("/api/admin/tenants/acme", headers=OPERATOR, json=body)
    assert patched.status_code == 200, patched.text


async def answered(fake: FakeDiscordServer, text: str, count: int) -> str:
    await asyncio.to_thread(fake.dispatch, ACME_TOKEN, "MESSAGE_CREATE", fake.message(text))
    sent = await asyncio.to_thread(fake.wait_for_sent, count, token=ACME_TOKEN)
    return sent[count - 1].content


async def test_a_bot_set_through_the_admin_api_runs_until_its_tenant_is_disabled(
    discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_discord(
        discord_fake, tmp_path, database_url, auth={"mode": "keys"}
    ) as served:
        created = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={"id": "acme", "settings": {"channels": {"helper": acme_bot(discord_fake)}}},
        )
        assert created.status_code == 201, created.text
        await asyncio.to_thread(discord_fake.wait_connected, ACME_TOKEN)  # no restart needed
        first = await answered(discord_fake, "hello acme", 1)
        running = await bots(served)

        await patch_acme(served, disabled=True)
        await asyncio.to_thread(discord_fake.wait_open, ACME_TOKEN, 0)
        after_disable = await bots(served)

        await patch_acme(served, disabled=False)
        await asyncio.to_thread(discord_fake.wait_connected, ACME_TOKEN, 2)
        again = await answered(discord_fake, "back again", 2)
    assert first == again == "Hello from Tally."
    assert running == [("acme", "helper", "gateway"), ("default", "dc", "gateway")]
    assert after_disable == [("default", "dc", "gateway")]
    # The default tenant's bot never reconnected.
    assert [i["token"] for i in discord_fake.identifies].count(DISCORD_TOKEN) == 1


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"token_env": "NOT_SET_ANYWHERE"}, "NOT_SET_ANYWHERE is not set"),
        ({"token_env": "COPY_OF_DISCORD_TOKEN"}, "the same bot token as channels.dc"),
    ],
    ids=["token-unset", "same-token"],
)
async def test_a_bot_that_could_not_run_is_refused_and_nothing_is_stored(
    discord_fake: FakeDiscordServer,
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, str],
    problem: str,
) -> None:
    monkeypatch.setenv("COPY_OF_DISCORD_TOKEN", DISCORD_TOKEN)
    async with serving_discord(
        discord_fake, tmp_path, database_url, auth={"mode": "keys"}
    ) as served:
        refused = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={
                "id": "acme",
                "settings": {"channels": {"helper": acme_bot(discord_fake, **overrides)}},
            },
        )
        tenants = (await served.client.get("/api/admin/tenants", headers=OPERATOR)).json()
        running = await bots(served)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "invalid_settings"
    assert problem in refused.json()["error"]["message"]
    assert "acme" not in {t["id"] for t in tenants["tenants"]}
    assert running == [("default", "dc", "gateway")]
