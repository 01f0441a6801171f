"""Slack bots set through the admin API: a tenant created with a bot has it running at once
(in Socket Mode the fake Slack sees its socket open; in Events API mode its path takes signed
events), disabling the tenant or removing the bot stops it (its socket closes, its path is
404), and a bot that could not run is refused (422) before anything is stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_auth import ADMIN_KEY, bearer
from tests.channels.slack_fixtures import BOT_TOKEN, ServedSlack, serving_slack, signed
from tests.fakes.slack_server import FakeSlackServer

OPERATOR = bearer(ADMIN_KEY)
ACME_BOT, ACME_APP, ACME_SIGNING = "xoxb-acme", "xapp-acme", "acme-signing-secret"


@pytest.fixture
def acme_slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlackServer]:
    """acme's own Slack app (a workspace of its own)."""
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("ACME_SLACK_BOT", ACME_BOT)
    monkeypatch.setenv("ACME_SLACK_APP", ACME_APP)
    monkeypatch.setenv("ACME_SLACK_SIGNING", ACME_SIGNING)
    with FakeSlackServer(bot_token=ACME_BOT, app_token=ACME_APP) as server:
        yield server


def acme_bot(acme_slack: FakeSlackServer, **overrides: Any) -> dict[str, Any]:
    return {
        "kind": "slack",
        "bot_token_env": "ACME_SLACK_BOT",
        "app_token_env": "ACME_SLACK_APP",
        "signing_secret_env": "ACME_SLACK_SIGNING",
        "mode": "socket",
        "allow_from": ["*"],
        "api_base_url": acme_slack.api_url,
    } | overrides


async def bots(served: ServedSlack) -> list[tuple[str, str, str]]:
    health = (await served.client.get("/api/health", headers=OPERATOR)).json()
    return sorted((bot["tenant_id"], bot["bot"], bot["mode"]) for bot in health["channels"])


async def change_acme(served: ServedSlack, method: str, **body: Any) -> None:
    if method == "post":
        answer = await served.client.post("/api/admin/tenants", headers=OPERATOR, json=body)
        assert answer.status_code == 201, answer.text
        return
    answer = await served.client.patch("/api/admin/tenants/acme", headers=OPERATOR, json=body)
    assert answer.status_code == 200, answer.text


async def answered(acme_slack: FakeSlackServer, text: str, count: int) -> str:
    await asyncio.to_thread(acme_slack.push, acme_slack.event(text))
    return (await asyncio.to_thread(acme_slack.wait_for_sent, count))[-1].text


async def test_a_socket_bot_set_through_the_admin_api_runs_until_its_tenant_is_disabled(
    slack: FakeSlackServer, acme_slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url, auth={"mode": "keys"}) as served:
        settings = {"channels": {"helper": acme_bot(acme_slack)}}
        await change_acme(served, "post", id="acme", settings=settings)
        await asyncio.to_thread(acme_slack.wait_connected, 1)  # at once: no restart needed
        first = await answered(acme_slack, "hello acme", 1)
        running = await bots(served)

        await change_acme(served, "patch", disabled=True)
        await asyncio.to_thread(acme_slack.wait_open_sockets, 0)
        after_disable = await bots(served)

        await change_acme(served, "patch", disabled=False)
        await asyncio.to_thread(acme_slack.wait_connected, 2)
        again = await answered(acme_slack, "back again", 2)
    assert first == again == "Hello from Tally."
    assert running == [("acme", "helper", "socket"), ("default", "sl", "socket")]
    assert after_disable == [("default", "sl", "socket")]
    assert slack.opened == 1 and slack.sent() == []  # the default tenant's bot never restarted


async def test_an_events_bot_set_through_the_admin_api_takes_events_until_removed(
    slack: FakeSlackServer, acme_slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_slack(slack, tmp_path, database_url, auth={"mode": "keys"}) as served:

        async def deliver(text: str) -> int:
            body = json.dumps(acme_slack.event(text)).encode()
            headers = signed(body, secret=ACME_SIGNING)
            answer = await served.client.post(
                "/channels/acme/helper", content=body, headers=headers
            )
            return answer.status_code

        settings = {"channels": {"helper": acme_bot(acme_slack, mode="events")}}
        await change_acme(served, "post", id="acme", settings=settings)
        accepted = await deliver("hello by events")
        (reply,) = await asyncio.to_thread(acme_slack.wait_for_sent, 1)
        await change_acme(served, "patch", settings={"channels": {}})
        after_removal = await deliver("anyone there?")
        listed = await bots(served)
    assert accepted == 200 and reply.text == "Hello from Tally."
    assert after_removal == 404 and listed == [("default", "sl", "socket")]
    assert len(acme_slack.sent()) == 1


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"bot_token_env": "NOT_SET_ANYWHERE"}, "bot_token_env: NOT_SET_ANYWHERE is not set"),
        ({"app_token_env": "NOT_SET_ANYWHERE"}, "app_token_env: NOT_SET_ANYWHERE is not set"),
        ({"bot_token_env": "COPY_OF_THE_BOT_TOKEN"}, "the same bot token as channels.sl"),
        ({"app_token_env": None}, "socket mode needs app_token_env"),
    ],
    ids=["bot-token-unset", "app-token-unset", "same-bot-token", "socket-without-app-token"],
)
async def test_a_bot_that_could_not_run_is_refused_and_nothing_is_stored(
    slack: FakeSlackServer,
    acme_slack: FakeSlackServer,
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, Any],
    problem: str,
) -> None:
    monkeypatch.setenv("COPY_OF_THE_BOT_TOKEN", BOT_TOKEN)
    bot = acme_bot(acme_slack, **overrides)
    async with serving_slack(slack, tmp_path, database_url, auth={"mode": "keys"}) as served:
        refused = await served.client.post(
            "/api/admin/tenants",
            headers=OPERATOR,
            json={"id": "acme", "settings": {"channels": {"helper": bot}}},
        )
        tenants = (await served.client.get("/api/admin/tenants", headers=OPERATOR)).json()
        running = await bots(served)
    assert refused.status_code == 422, refused.text
    assert problem in refused.json()["error"]["message"]
    assert "acme" not in {t["id"] for t in tenants["tenants"]}
    assert running == [("default", "sl", "socket")]
    assert acme_slack.calls("apps.connections.open") == 0
