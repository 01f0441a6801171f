"""QQ bots set through the admin API: a tenant created with a webhook bot takes signed calls at
once and stops when the bot is removed; a websocket bot identifies at the gateway at once and is
gone when its tenant is disabled; and a bot that could not run (its secret not set, another
bot's app id) is refused (422) before anything is stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_auth import ADMIN_KEY, bearer
from tests.channels.qq_fixtures import APP_ID, ServedQQ, qq_settings, serving_qq
from tests.fakes.qq_server import FakeQQServer, webhook_headers

OPERATOR = bearer(ADMIN_KEY)
ACME_APP, ACME_SECRET = "102000555", "acme-qq-app-secret"


@pytest.fixture(autouse=True)
def keys_mode(monkeypatch: pytest.MonkeyPatch, qq: FakeQQServer) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("ACME_QQ_SECRET", ACME_SECRET)
    qq.add_app(ACME_APP, ACME_SECRET)


def acme_bot(qq: FakeQQServer, **overrides: Any) -> dict[str, Any]:
    return qq_settings(qq, app_id=ACME_APP, app_secret_env="ACME_QQ_SECRET") | overrides


async def bots(served: ServedQQ) -> list[tuple[str, str, str]]:
    health = (await served.client.get("/api/health", headers=OPERATOR)).json()
    return sorted((bot["tenant_id"], bot["bot"], bot["mode"]) for bot in health["channels"])


async def admin(served: ServedQQ, method: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return await served.client.request(method, path, headers=OPERATOR, json=body)


async def test_a_webhook_bot_set_through_the_admin_api_takes_calls_until_removed(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async def deliver(served: ServedQQ, event: dict[str, Any]) -> httpx.Response:
        body = json.dumps(event).encode()
        headers = webhook_headers(ACME_SECRET, body)
        return await served.client.post("/channels/acme/helper", content=body, headers=headers)

    async with serving_qq(qq, tmp_path, database_url, auth={"mode": "keys"}) as served:
        body = {"id": "acme", "settings": {"channels": {"helper": acme_bot(qq)}}}
        created = await admin(served, "POST", "/api/admin/tenants", body)
        assert created.status_code == 201, created.text
        accepted = await deliver(served, qq.private_message("hello acme"))
        (reply,) = await served.sent(1)
        running = await bots(served)
        removed = await admin(
            served, "PATCH", "/api/admin/tenants/acme", {"settings": {"channels": {}}}
        )
        after_removal = await deliver(served, qq.private_message("anyone there?"))
        listed = await bots(served)
    assert accepted.status_code == 200 and removed.status_code == 200
    assert (reply.app_id, reply.text) == (ACME_APP, "Hello from Tally.")
    assert running == [("acme", "helper", "webhook"), ("default", "qb", "webhook")]
    assert after_removal.status_code == 404 and listed == [("default", "qb", "webhook")]
    assert len(qq.sent()) == 1


async def test_a_websocket_bot_runs_at_once_and_stops_with_its_tenant(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url, auth={"mode": "keys"}) as served:
        body = {"id": "acme", "settings": {"channels": {"ws": acme_bot(qq, mode="websocket")}}}
        assert (await admin(served, "POST", "/api/admin/tenants", body)).status_code == 201
        await asyncio.to_thread(qq.wait_connected, ACME_APP)
        await asyncio.to_thread(qq.push, ACME_APP, qq.private_message("over the gateway"))
        (reply,) = await served.sent(1)
        running = await bots(served)
        disabled = await admin(served, "PATCH", "/api/admin/tenants/acme", {"disabled": True})
        after_disable = await bots(served)
    assert (reply.app_id, reply.text) == (ACME_APP, "Hello from Tally.")
    assert running == [("acme", "ws", "websocket"), ("default", "qb", "webhook")]
    assert disabled.status_code == 200 and after_disable == [("default", "qb", "webhook")]


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (
            {"app_secret_env": "NOT_SET_ANYWHERE"},
            "channels.helper.app_secret_env: NOT_SET_ANYWHERE is not set",
        ),
        ({"app_id": APP_ID}, "the same app id as channels.qb"),
    ],
    ids=["secret-unset", "same-app"],
)
async def test_a_bot_that_could_not_run_is_refused_and_nothing_is_stored(
    qq: FakeQQServer,
    tmp_path: Path,
    database_url: str,
    overrides: dict[str, str],
    problem: str,
) -> None:
    async with serving_qq(qq, tmp_path, database_url, auth={"mode": "keys"}) as served:
        body = {"id": "acme", "settings": {"channels": {"helper": acme_bot(qq, **overrides)}}}
        refused = await admin(served, "POST", "/api/admin/tenants", body)
        tenants = (await served.client.get("/api/admin/tenants", headers=OPERATOR)).json()
        running = await bots(served)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "invalid_settings"
    assert problem in refused.json()["error"]["message"]
    assert "acme" not in {t["id"] for t in tenants["tenants"]}
    assert running == [("default", "qb", "webhook")]
