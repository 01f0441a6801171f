"""Feishu bots set through the admin API: a tenant created with a bot has it running at once
(its long connection opens), disabling the tenant stops it (the connection closes) and enabling
it starts it again, a webhook bot takes signed events at its path until removed, and a bot that
could not run is refused (422) before anything is stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_auth import ADMIN_KEY, bearer
from tests.channels.feishu_fixtures import (
    APP_ID,
    ServedFeishu,
    feishu_settings,
    serving_feishu,
    webhook_call,
)
from tests.fakes.feishu_server import FakeFeishuServer, Sent

OPERATOR = bearer(ADMIN_KEY)
ACME_APP, ACME_SECRET = "cli_acme_admin", "acme-fs-secret"


@pytest.fixture(autouse=True)
def keys_mode(monkeypatch: pytest.MonkeyPatch, feishu: FakeFeishuServer) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("ACME_FS_SECRET", ACME_SECRET)
    feishu.add_app(ACME_APP, ACME_SECRET, bot_open_id="ou_acme_bot")


def acme_bot(feishu: FakeFeishuServer, **overrides: Any) -> dict[str, Any]:
    own = {"app_id": ACME_APP, "app_secret_env": "ACME_FS_SECRET"}
    return feishu_settings(feishu, **own | overrides)


async def bots(served: ServedFeishu) -> list[tuple[str, str, str]]:
    health = (await served.client.get("/api/health", headers=OPERATOR)).json()
    return sorted((bot["tenant_id"], bot["bot"], bot["mode"]) for bot in health["channels"])


async def patch_acme(served: ServedFeishu, **body: Any) -> None:
    patched = await served.client.patch("/api/admin/tenants/acme", headers=OPERATOR, json=body)
    assert patched.status_code == 200, patched.text


async def create_acme(served: ServedFeishu, channels: dict[str, Any]) -> None:
    created = await served.client.post(
        "/api/admin/tenants",
        headers=OPERATOR,
        json={"id": "acme", "settings": {"channels": channels}},
    )
    assert created.status_code == 201, created.text


async def answered(feishu: FakeFeishuServer, text: str, count: int) -> Sent:
    await asyncio.to_thread(feishu.push, ACME_APP, feishu.message_event(text, app_id=ACME_APP))
    return (await asyncio.to_thread(feishu.wait_for_sent, count))[count - 1]


async def test_a_bot_set_through_the_admin_api_runs_until_its_tenant_is_disabled(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url, auth={"mode": "keys"}) as served:
        await create_acme(served, {"helper": acme_bot(feishu)})
        await asyncio.to_thread(feishu.wait_connected, ACME_APP)  # at once: no restart
        first = await answered(feishu, "hello acme", 1)
        running = await bots(served)

        await patch_acme(served, disabled=True)
        await asyncio.to_thread(feishu.wait_open_links, ACME_APP, 0)
        after_disable = await bots(served)

        await patch_acme(served, disabled=False)
        await asyncio.to_thread(feishu.wait_connected, ACME_APP, 2)
        await asyncio.to_thread(feishu.wait_open_links, ACME_APP, 1)
        again = await answered(feishu, "back again", 2)
    assert first.text == again.text == "Hello from Tally."
    assert {s.app_id for s in (first, again)} == {ACME_APP}
    assert running == [("acme", "helper", "websocket"), ("default", "fs", "websocket")]
    assert after_disable == [("default", "fs", "websocket")]
    assert feishu.opened(APP_ID) == 1  # the default tenant's bot never restarted


async def test_a_webhook_bot_set_through_the_admin_api_takes_events_until_removed(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async def post(served: ServedFeishu, text: str) -> int:
        event = feishu.message_event(text, app_id=ACME_APP, token="feishu-verify-1")
        body, headers = webhook_call(json.dumps(event).encode())
        answer = await served.client.post("/channels/acme/helper", content=body, headers=headers)
        return answer.status_code

    async with serving_feishu(feishu, tmp_path, database_url, auth={"mode": "keys"}) as served:
        await create_acme(served, {"helper": acme_bot(feishu, mode="webhook")})
        accepted = await post(served, "hello by webhook")
        (reply,) = await asyncio.to_thread(feishu.wait_for_sent, 1)
        await patch_acme(served, settings={"channels": {}})
        after_removal = await post(served, "anyone there?")
    assert accepted == 200 and (reply.app_id, reply.text) == (ACME_APP, "Hello from Tally.")
    assert after_removal == 404 and len(feishu.sent()) == 1


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (
            {"app_secret_env": "NOT_SET_ANYWHERE"},
            "channels.helper.app_secret_env: NOT_SET_ANYWHERE is not set",
        ),
        ({"app_id": APP_ID}, "the same app id as channels.fs"),
    ],
    ids=["secret-unset", "same-app"],
)
async def test_a_bot_that_could_not_run_is_refused_before_anything_is_stored(
    feishu: FakeFeishuServer,
    tmp_path: Path,
    database_url: str,
    overrides: dict[str, Any],
    problem: str,
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url, auth={"mode": "keys"}) as served:
        created = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={
                "id": "acme",
                "settings": {"channels": {"helper": acme_bot(feishu, **overrides)}},
            },
        )
        tenants = await served.client.get("/api/admin/tenants", headers=OPERATOR)
    assert created.status_code == 422, created.text
    assert problem in created.text
    assert "acme" not in tenants.text
