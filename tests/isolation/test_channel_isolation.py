"""Tenant isolation for chat channels: two tenants each run a Telegram bot named alike, and one
person writes to both from the same chat id with the very same update and message ids.

Each bot answers through its own token, from its own tenant's session and memory; a webhook
call signed with one tenant's secret is refused at the other's path; and an unknown tenant, an
unknown bot and a polling bot all answer the webhook route alike, so the route tells an outsider
nothing about which tenants or bots exist.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.fakes.telegram_server import FakeTelegramServer

TENANTS = {"acme": "111:acme-token", "globex": "222:globex-token"}
SECRETS = {"acme": "acme-secret", "globex": "globex-secret"}
POLLING_TOKEN = "333:polling-token"


@pytest.fixture
def telegram(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTelegramServer]:
    with FakeTelegramServer() as server:
        for tenant, token in TENANTS.items():
            monkeypatch.setenv(f"{tenant.upper()}_TOKEN", token)
            monkeypatch.setenv(f"{tenant.upper()}_SECRET", SECRETS[tenant])
            server.add_bot(token, username=f"{tenant}_bot")
        monkeypatch.setenv("POLLING_TOKEN", POLLING_TOKEN)
        server.add_bot(POLLING_TOKEN, username="polling_bot")
        yield server


def webhook_bot(telegram: FakeTelegramServer, tenant: str) -> dict[str, Any]:
    return {
        "kind": "telegram",
        "token_env": f"{tenant.upper()}_TOKEN",
        "mode": "webhook",
        "webhook_url": f"https://bots.example.com/{tenant}",
        "webhook_secret_env": f"{tenant.upper()}_SECRET",
        "allow_from": ["*"],
        "api_base_url": telegram.base_url,
    }


async def deliver(
    client: httpx.AsyncClient, path: str, update: dict[str, Any], secret: str
) -> httpx.Response:
    return await client.post(path, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret})


async def test_two_tenants_bots_never_share_a_chat_a_memory_or_a_secret(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    polling = webhook_bot(telegram, "acme") | {"mode": "polling", "token_env": "POLLING_TOKEN"}
    settings = make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        tenants={tenant: {"channels": {"tg": webhook_bot(telegram, tenant)}} for tenant in TENANTS}
        | {"initech": {"channels": {"poller": polling}}},
    )
    provider = ScriptedProvider(replies=["(unscripted)"])
    app = create_app(settings, provider=provider)
    update = telegram.user_message("what is my launch code?", chat_id=42, user_id=42)
    async with serve(app) as client:
        memory = app.state.services.memory
        fact = NewEntry(source="manual", content="acme-only: the launch code is 1234")
        await memory.append(tenant_id="acme", scope_key="", entries=[fact])

        # Signed by the other tenant, or not signed: refused, nothing stored or answered.
        crossed = [
            await deliver(client, "/channels/acme/tg", update, SECRETS["globex"]),
            await deliver(client, "/channels/globex/tg", update, SECRETS["acme"]),
            await deliver(client, "/channels/globex/tg", update, ""),
        ]
        # Who exists is not told: every miss answers the same.
        misses = [
            await deliver(client, path, update, SECRETS["acme"])
            for path in (
                "/channels/nobody/tg",
                "/channels/acme/nobot",
                "/channels/initech/poller",  # a polling bot takes no webhook
            )
        ]
        stored_after_refusals = await _sessions(app, "acme") + await _sessions(app, "globex")

        # The same update (ids and all) to both bots: two turns, one per tenant.
        provider.push("acme answers", "globex answers")
        for tenant in TENANTS:
            accepted = await deliver(
                client, f"/channels/{tenant}/tg", copy.deepcopy(update), SECRETS[tenant]
            )
            assert accepted.status_code == 200, accepted.text
            await app.state.channels.get(tenant, "tg").settle()
        sessions = {tenant: await _sessions(app, tenant) for tenant in TENANTS}

    assert [r.status_code for r in crossed] == [401, 401, 401]
    assert {(r.status_code, r.text) for r in misses} == {(404, misses[0].text)}
    assert stored_after_refusals == []

    replies = {s.token: s.text for s in telegram.sent(42, "sendMessage")}
    assert replies == {TENANTS["acme"]: "acme answers", TENANTS["globex"]: "globex answers"}
    acme_request, globex_request = provider.requests
    assert "acme-only" in acme_request.system  # acme's memory reached acme's turn...
    assert "acme-only" not in repr(globex_request)  # ...and only acme's
    assert len(sessions["acme"]) == len(sessions["globex"]) == 1
    assert sessions["acme"][0] != sessions["globex"][0]


async def _sessions(app: Any, tenant_id: str) -> list[str]:
    found = await app.state.services.sessions.find(
        tenant_id=tenant_id, channel="telegram", external_key="tg:42"
    )
    return [] if found is None else [found.id]
