"""WeCom apps set through the admin API: a tenant created with an app takes its callbacks at
once, a change restarts it, removing it stops it (its path answers like any unknown bot), and
an app that could not run (a secret not set, a key not an EncodingAESKey, the same app as
another bot) is refused (422) before anything is stored. A robot set the same way connects at
once and disconnects when removed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_auth import ADMIN_KEY, bearer
from tests.channels.wecom_fixtures import APP, ServedApp, app_settings, serving_app
from tests.fakes.wecom_robot_server import FakeRobotServer
from tests.fakes.wecom_server import App, FakeWeComServer

OPERATOR = bearer(ADMIN_KEY)
ACME = App(
    corp_id="ww-acme-corp",
    agent_id=1000042,
    secret="acme-wecom-secret",
    token="acmetoken",
    aes_key="ACMEacmeACMEacmeACMEacmeACMEacmeACMEacme123",
)


@pytest.fixture(autouse=True)
def keys_mode(monkeypatch: pytest.MonkeyPatch, wecom: FakeWeComServer) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("ACME_WC_SECRET", ACME.secret)
    monkeypatch.setenv("ACME_WC_TOKEN", ACME.token)
    monkeypatch.setenv("ACME_WC_AES_KEY", ACME.aes_key)
    wecom.add_app(ACME)


def acme_app(wecom: FakeWeComServer, **overrides: Any) -> dict[str, Any]:
    own = {
        "corp_id": ACME.corp_id,
        "agent_id": ACME.agent_id,
        "secret_env": "ACME_WC_SECRET",
        "token_env": "ACME_WC_TOKEN",
        "aes_key_env": "ACME_WC_AES_KEY",
    }
    return app_settings(wecom, **own | overrides)


async def bots(served: ServedApp) -> list[tuple[str, str, str]]:
    health = (await served.client.get("/api/health", headers=OPERATOR)).json()
    return sorted((bot["tenant_id"], bot["bot"], bot["mode"]) for bot in health["channels"])


async def callback(served: ServedApp, bot: str, text: str) -> httpx.Response:
    query, body = served.wecom.callback(ACME, served.wecom.message_xml(text, app=ACME))
    return await served.client.post(f"/channels/acme/{bot}", params=query, content=body)


async def test_an_app_set_through_the_admin_api_takes_callbacks_until_removed(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url, auth={"mode": "keys"}) as served:
        created = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={"id": "acme", "settings": {"channels": {"helper": acme_app(wecom)}}},
        )
        assert created.status_code == 201, created.text
        accepted = await callback(served, "helper", "hello acme")
        (reply,) = await asyncio.to_thread(wecom.wait_for_sent, 1)
        first = served.app.state.channels.get("acme", "helper")

        changed = {"channels": {"helper": acme_app(wecom, markdown=False)}}
        patched = await served.client.patch(
            "/api/admin/tenants/acme", headers=OPERATOR, json={"settings": changed}
        )
        restarted = served.app.state.channels.get("acme", "helper")
        await callback(served, "helper", "as text now")
        _, as_text = await asyncio.to_thread(wecom.wait_for_sent, 2)
        running = await bots(served)

        removed = await served.client.patch(
            "/api/admin/tenants/acme", headers=OPERATOR, json={"settings": {"channels": {}}}
        )
        after_removal = await callback(served, "helper", "anyone there?")
        unknown = await callback(served, "nobot", "anyone there?")
        listed = await bots(served)
    assert accepted.status_code == 200 and patched.status_code == removed.status_code == 200
    assert (reply.agent_id, reply.msgtype, reply.content) == (
        ACME.agent_id,
        "markdown",
        "Hello from Tally.",
    )
    assert restarted is not first and (as_text.agent_id, as_text.msgtype) == (ACME.agent_id, "text")
    assert running == [("acme", "helper", "app"), ("default", "wc", "app")]
    assert (after_removal.status_code, after_removal.text) == (404, unknown.text)
    assert listed == [("default", "wc", "app")]
    assert len(wecom.sent()) == 2


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"secret_env": "NOT_SET_ANYWHERE"}, "channels.helper.secret_env: NOT_SET_ANYWHERE"),
        ({"aes_key_env": "ACME_WC_TOKEN"}, "is not a 43-character EncodingAESKey"),
        ({"corp_id": APP.corp_id, "agent_id": APP.agent_id}, "the same agent or robot id as"),
    ],
    ids=["secret-unset", "bad-aes-key", "same-app"],
)
async def test_an_app_that_could_not_run_is_refused_and_nothing_is_stored(
    wecom: FakeWeComServer,
    tmp_path: Path,
    database_url: str,
    overrides: dict[str, Any],
    problem: str,
) -> None:
    async with serving_app(wecom, tmp_path, database_url, auth={"mode": "keys"}) as served:
        refused = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={"id": "acme", "settings": {"channels": {"helper": acme_app(wecom, **overrides)}}},
        )
        tenants = (await served.client.get("/api/admin/tenants", headers=OPERATOR)).json()
        running = await bots(served)
        await served.post(served.message("still there?"))  # the default app is untouched
        (reply,) = await served.sent(1)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "invalid_settings"
    assert problem in refused.json()["error"]["message"]
    assert "acme" not in {t["id"] for t in tenants["tenants"]}
    assert running == [("default", "wc", "app")]
    assert reply.content == "Hello from Tally."


async def test_a_robot_set_through_the_admin_api_connects_and_disconnects_when_removed(
    wecom: FakeWeComServer,
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACME_WR_SECRET", "acme-robot-secret")
    with FakeRobotServer("aib-acme", "acme-robot-secret") as robot:
        helper = {
            "kind": "wecom",
            "mode": "robot",
            "bot_id": "aib-acme",
            "bot_secret_env": "ACME_WR_SECRET",
            "allow_from": ["*"],
            "ws_url": robot.url,
        }
        async with serving_app(wecom, tmp_path, database_url, auth={"mode": "keys"}) as served:
            created = await served.client.post(
                "/api/admin/tenants",
                headers=OPERATOR,
                json={"id": "acme", "settings": {"channels": {"helper": helper}}},
            )
            assert created.status_code == 201, created.text
            await asyncio.to_thread(robot.wait_connected)
            await asyncio.to_thread(robot.push, robot.message("hello acme"))
            (reply,) = await asyncio.to_thread(robot.wait_for_replies, 1)
            running = await bots(served)
            removed = await served.client.patch(
                "/api/admin/tenants/acme", headers=OPERATOR, json={"settings": {"channels": {}}}
            )
            await asyncio.to_thread(robot.wait_until, lambda r: r.open_links() == 0, "no link")
            listed = await bots(served)
    assert reply.content == "Hello from Tally."
    assert running == [("acme", "helper", "robot"), ("default", "wc", "app")]
    assert removed.status_code == 200 and listed == [("default", "wc", "app")]
