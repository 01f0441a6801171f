"""Bots set through the admin API: a tenant created with a bot has it running at once, a change
restarts it, disabling the tenant stops it, and a bot that could not run is refused (422)
before anything is stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.test_auth import ADMIN_KEY, bearer
from tests.channels.conftest import TOKEN, Served, bot_settings, serving_bot
from tests.fakes.telegram_server import FakeTelegramServer

OPERATOR = bearer(ADMIN_KEY)
ACME_TOKEN = "777:acme-token"


@pytest.fixture(autouse=True)
def keys_mode(monkeypatch: pytest.MonkeyPatch, telegram: FakeTelegramServer) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("ACME_TG_TOKEN", ACME_TOKEN)
    telegram.add_bot(ACME_TOKEN, username="acme_bot")


async def bots(served: Served) -> list[tuple[str, str]]:
    health = (await served.client.get("/api/health", headers=OPERATOR)).json()
    return sorted((bot["tenant_id"], bot["bot"]) for bot in health["channels"])


async def test_a_bot_set_through_the_admin_api_runs_until_its_tenant_is_disabled(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    acme_bot = bot_settings(telegram, token_env="ACME_TG_TOKEN")
    async with serving_bot(telegram, tmp_path, database_url, auth={"mode": "keys"}) as served:
        created = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={"id": "acme", "settings": {"channels": {"helper": acme_bot}}},
        )
        assert created.status_code == 201, created.text
        telegram.push_update(ACME_TOKEN, telegram.user_message("hello acme", chat_id=5))
        (answer,) = await served.sent(1, chat_id=5)
        running = await bots(served)
        disabled = await served.client.patch(
            "/api/admin/tenants/acme", headers=OPERATOR, json={"disabled": True}
        )
        assert disabled.status_code == 200, disabled.text
        after_disable = await bots(served)
    assert answer.text == "Hello from Tally." and answer.token == ACME_TOKEN
    assert running == [("acme", "helper"), ("default", "tg")]
    assert after_disable == [("default", "tg")]


async def test_a_bot_removed_from_a_tenants_settings_stops(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    acme_bot = bot_settings(telegram, token_env="ACME_TG_TOKEN")
    async with serving_bot(telegram, tmp_path, database_url, auth={"mode": "keys"}) as served:
        settings = {"channels": {"helper": acme_bot}}
        await served.client.post(
            "/api/admin/tenants", headers=OPERATOR, json={"id": "acme", "settings": settings}
        )
        renamed = await served.client.patch(
            "/api/admin/tenants/acme",
            headers=OPERATOR,
            json={"settings": {"channels": {"renamed": acme_bot}}},
        )
        assert renamed.status_code == 200, renamed.text
        after_rename = await bots(served)
        await served.client.patch(
            "/api/admin/tenants/acme", headers=OPERATOR, json={"settings": {"channels": {}}}
        )
        after_removal = await bots(served)
    assert after_rename == [("acme", "renamed"), ("default", "tg")]
    assert after_removal == [("default", "tg")]


@pytest.mark.parametrize(
    ("token_env", "problem"),
    [("TG_TOKEN", "the same bot token as channels.tg"), ("NOT_SET_ANYWHERE", "is not set")],
)
async def test_a_bot_that_could_not_run_is_refused_and_nothing_is_stored(
    telegram: FakeTelegramServer,
    tmp_path: Path,
    database_url: str,
    token_env: str,
    problem: str,
) -> None:
    stolen = bot_settings(telegram, token_env=token_env)
    async with serving_bot(telegram, tmp_path, database_url, auth={"mode": "keys"}) as served:
        refused = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={"id": "acme", "settings": {"channels": {"helper": stolen}}},
        )
        tenants = (await served.client.get("/api/admin/tenants", headers=OPERATOR)).json()
        running = await bots(served)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "invalid_settings"
    assert problem in refused.json()["error"]["message"]
    assert "acme" not in {t["id"] for t in tenants["tenants"]}
    assert running == [("default", "tg")]
    assert TOKEN in telegram.bots  # the default tenant's bot is untouched
