"""DingTalk robots set through the admin API: a tenant created with a robot has it running at
once (in Stream mode the gateway sees it connect; in callback mode its path takes signed
callbacks), a change restarts it, removing it or disabling the tenant stops it (its connection
closes), and a robot that could not run is refused (422) before anything is stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_auth import ADMIN_KEY, bearer
from tests.channels.conftest import (
    CLIENT_ID,
    ServedRobot,
    robot_settings,
    serving_robot,
    signed,
)
from tests.fakes.dingtalk_server import FakeDingTalkServer, Sent

OPERATOR = bearer(ADMIN_KEY)
ACME_ID, ACME_SECRET, ACME_ROBOT = "acme-client", "acme-app-secret", "acme-robot"
STAFF_ID = "staff-1"  # the fake's sender: the OpenAPI's target for a private reply


@pytest.fixture(autouse=True)
def keys_mode(monkeypatch: pytest.MonkeyPatch, dingtalk: FakeDingTalkServer) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("ACME_DT_ID", ACME_ID)
    monkeypatch.setenv("ACME_DT_SECRET", ACME_SECRET)
    dingtalk.add_app(ACME_ID, ACME_SECRET, ACME_ROBOT)


def acme_robot(dingtalk: FakeDingTalkServer, **overrides: Any) -> dict[str, Any]:
    own = {"client_id_env": "ACME_DT_ID", "client_secret_env": "ACME_DT_SECRET"}
    return robot_settings(dingtalk, **own | {"robot_code": ACME_ROBOT} | overrides)


async def bots(served: ServedRobot) -> list[tuple[str, str, str]]:
    health = (await served.client.get("/api/health", headers=OPERATOR)).json()
    return sorted((bot["tenant_id"], bot["bot"], bot["mode"]) for bot in health["channels"])


async def create_acme(served: ServedRobot, channels: dict[str, Any]) -> None:
    created = await served.client.post(
        "/api/admin/tenants",
        headers=OPERATOR,
        json={"id": "acme", "settings": {"channels": channels}},
    )
    assert created.status_code == 201, created.text


async def patch_acme(served: ServedRobot, **body: Any) -> None:
    patched = await served.client.patch("/api/admin/tenants/acme", headers=OPERATOR, json=body)
    assert patched.status_code == 200, patched.text


async def connected(dingtalk: FakeDingTalkServer, client_id: str, count: int) -> None:
    """Until the app has opened `count` connections in all, and only its newest is open."""
    await asyncio.to_thread(dingtalk.wait_connected, client_id, count)
    await asyncio.to_thread(dingtalk.wait_open_links, client_id, 1)


async def closed(dingtalk: FakeDingTalkServer, client_id: str) -> None:
    await asyncio.to_thread(dingtalk.wait_open_links, client_id, 0)


async def answered(dingtalk: FakeDingTalkServer, message: dict[str, Any], count: int) -> Sent:
    """Push `message` to acme's app; its reply, the `count`th message sent to Ada."""
    await asyncio.to_thread(dingtalk.push, ACME_ID, message)
    sent = await asyncio.to_thread(dingtalk.wait_for_sent, count, target=STAFF_ID)
    return sent[count - 1]


def private(dingtalk: FakeDingTalkServer, text: str) -> dict[str, Any]:
    """A private message to acme's robot whose session webhook expired: the reply goes by the
    OpenAPI, with the access token of the app whose robot code it names (the fake checks)."""
    return dingtalk.robot_message(text, robot_code=ACME_ROBOT, webhook_expires_in_s=-60)


async def test_a_robot_set_through_the_admin_api_runs_until_its_tenant_is_disabled(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url, auth={"mode": "keys"}) as served:
        await create_acme(served, {"helper": acme_robot(dingtalk)})
        await connected(dingtalk, ACME_ID, 1)  # at once: no restart needed
        first = await answered(dingtalk, private(dingtalk, "hello acme"), 1)
        running = await bots(served)

        await patch_acme(served, disabled=True)
        await closed(dingtalk, ACME_ID)
        after_disable = await bots(served)

        await patch_acme(served, disabled=False)
        await connected(dingtalk, ACME_ID, 2)
        again = await answered(dingtalk, private(dingtalk, "back again"), 2)
        after_enable = await bots(served)
    assert first.text == again.text == "Hello from Tally."
    assert {(s.via, s.robot_code) for s in (first, again)} == {("batchSend", ACME_ROBOT)}
    assert running == after_enable == [("acme", "helper", "stream"), ("default", "dt", "stream")]
    assert after_disable == [("default", "dt", "stream")]
    assert dingtalk.opened(CLIENT_ID) == 1  # the default tenant's robot never restarted


async def test_a_changed_robot_restarts_and_a_removed_one_stops(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url, auth={"mode": "keys"}) as served:
        await create_acme(served, {"helper": acme_robot(dingtalk)})
        await connected(dingtalk, ACME_ID, 1)
        first = served.app.state.channels.get("acme", "helper")

        # group_policy: all (from mention): a new robot on a new connection, the old one closed.
        changed = acme_robot(dingtalk, group_policy="all")
        await patch_acme(served, settings={"channels": {"helper": changed}})
        await connected(dingtalk, ACME_ID, 2)
        restarted = served.app.state.channels.get("acme", "helper")
        await asyncio.to_thread(
            dingtalk.push,
            ACME_ID,
            dingtalk.robot_message(  # in a group, without an @mention
                "all ears?",
                robot_code=ACME_ROBOT,
                conversation_id="cid-group-1",
                conversation_type="2",
            ),
        )
        (in_group,) = await asyncio.to_thread(dingtalk.wait_for_sent, 1)

        # The same settings again: nothing to restart.
        await patch_acme(served, settings={"channels": {"helper": changed}})
        unchanged = served.app.state.channels.get("acme", "helper")

        await patch_acme(served, settings={"channels": {"renamed": changed}})
        await connected(dingtalk, ACME_ID, 3)
        after_rename = await bots(served)

        await patch_acme(served, settings={"channels": {}})
        await closed(dingtalk, ACME_ID)
        after_removal = await bots(served)
        gone = served.app.state.channels.get("acme", "renamed")
    assert first is not None and restarted is not first and unchanged is restarted
    assert in_group.text == "Hello from Tally."  # the changed group_policy is the one in force
    assert after_rename == [("acme", "renamed", "stream"), ("default", "dt", "stream")]
    assert after_removal == [("default", "dt", "stream")] and gone is None
    assert dingtalk.opened(ACME_ID) == 3 and dingtalk.opened(CLIENT_ID) == 1


async def test_a_callback_robot_set_through_the_admin_api_takes_callbacks_until_removed(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async def callback(served: ServedRobot, message: dict[str, Any]) -> httpx.Response:
        return await served.client.post(
            "/channels/acme/helper",
            content=json.dumps(message),
            headers=signed(secret=ACME_SECRET),
        )

    async with serving_robot(dingtalk, tmp_path, database_url, auth={"mode": "keys"}) as served:
        await create_acme(served, {"helper": acme_robot(dingtalk, mode="callback")})
        accepted = await callback(served, private(dingtalk, "hello by callback"))
        (reply,) = await asyncio.to_thread(dingtalk.wait_for_sent, 1, target=STAFF_ID)
        running = await bots(served)

        await patch_acme(served, settings={"channels": {}})
        after_removal = await callback(served, private(dingtalk, "anyone there?"))
        unknown = await served.client.post(
            "/channels/acme/nobot", content="{}", headers=signed(secret=ACME_SECRET)
        )
        listed = await bots(served)
    assert accepted.status_code == 200, accepted.text
    assert (reply.robot_code, reply.text) == (ACME_ROBOT, "Hello from Tally.")
    assert running == [("acme", "helper", "callback"), ("default", "dt", "stream")]
    assert (after_removal.status_code, after_removal.text) == (404, unknown.text)
    assert listed == [("default", "dt", "stream")]
    assert len(dingtalk.sent()) == 1


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (
            {"client_id_env": "NOT_SET_ANYWHERE"},
            "channels.helper.client_id_env: NOT_SET_ANYWHERE is not set",
        ),
        (
            {"client_secret_env": "NOT_SET_ANYWHERE"},
            "channels.helper.client_secret_env: NOT_SET_ANYWHERE is not set",
        ),
        ({"client_id_env": "DT_CLIENT_ID"}, "the same client id as channels.dt"),
        # Another variable, the same value: the client id is what two robots may not share.
        ({"client_id_env": "COPY_OF_DT_CLIENT_ID"}, "the same client id as channels.dt"),
    ],
    ids=["id-unset", "secret-unset", "same-variable", "same-value"],
)
async def test_a_robot_that_could_not_run_is_refused_and_nothing_is_stored(
    dingtalk: FakeDingTalkServer,
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, str],
    problem: str,
) -> None:
    monkeypatch.setenv("COPY_OF_DT_CLIENT_ID", CLIENT_ID)
    refused_robot = acme_robot(dingtalk, **overrides)
    async with serving_robot(dingtalk, tmp_path, database_url, auth={"mode": "keys"}) as served:
        refused = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={"id": "acme", "settings": {"channels": {"helper": refused_robot}}},
        )
        tenants = (await served.client.get("/api/admin/tenants", headers=OPERATOR)).json()
        running = await bots(served)
        await served.push(served.message("still there?"))  # the default robot is untouched
        (reply,) = await served.sent(1)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "invalid_settings"
    assert problem in refused.json()["error"]["message"]
    assert "acme" not in {t["id"] for t in tenants["tenants"]}
    assert running == [("default", "dt", "stream")]
    assert reply.text == "Hello from Tally."
    assert dingtalk.opened(CLIENT_ID) == 1 and dingtalk.open_calls == 1


async def test_a_robot_change_that_could_not_run_leaves_the_tenants_robots_as_they_were(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url, auth={"mode": "keys"}) as served:
        settings = {"channels": {"helper": acme_robot(dingtalk)}}
        await create_acme(served, settings["channels"])
        globex = await served.client.post(
            "/api/admin/tenants", headers=OPERATOR, json={"id": "globex"}
        )
        assert globex.status_code == 201, globex.text
        await connected(dingtalk, ACME_ID, 1)
        running = served.app.state.channels.get("acme", "helper")

        # globex takes acme's app; acme's robot loses its secret.
        stolen = acme_robot(dingtalk)
        took_app = await served.client.patch(
            "/api/admin/tenants/globex",
            headers=OPERATOR,
            json={"settings": {"channels": {"thief": stolen}}},
        )
        broken = acme_robot(dingtalk, client_secret_env="NOT_SET_ANYWHERE")
        lost_secret = await served.client.patch(
            "/api/admin/tenants/acme",
            headers=OPERATOR,
            json={"settings": {"channels": {"helper": broken}}},
        )
        tenants = (await served.client.get("/api/admin/tenants", headers=OPERATOR)).json()
        listed = await bots(served)
        still = served.app.state.channels.get("acme", "helper")
        reply = await answered(dingtalk, private(dingtalk, "still acme's?"), 1)
    assert [took_app.status_code, lost_secret.status_code] == [422, 422]
    assert {r.json()["error"]["code"] for r in (took_app, lost_secret)} == {"invalid_settings"}
    assert (
        "the same client id as tenants.acme.channels.helper" in took_app.json()["error"]["message"]
    )
    assert (
        "client_secret_env: NOT_SET_ANYWHERE is not set" in lost_secret.json()["error"]["message"]
    )
    stored = {t["id"]: t["settings"] for t in tenants["tenants"]}
    assert stored["acme"] == settings and stored["globex"] == {}
    assert listed == [("acme", "helper", "stream"), ("default", "dt", "stream")]
    assert still is running and dingtalk.opened(ACME_ID) == 1
    assert (reply.robot_code, reply.text) == (ACME_ROBOT, "Hello from Tally.")
