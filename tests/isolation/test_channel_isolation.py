"""Tenant isolation for chat channels: two tenants each run a bot named alike (Telegram, and
DingTalk in Stream and in callback mode), and one person writes to both from the same chat or
conversation id with the very same update, message and sender ids.

Each bot answers through its own credentials (token; client id, secret and robot code), from
its own tenant's session and memory; a webhook call signed with one tenant's secret is refused at
the other's path; and an unknown tenant, an unknown bot and a bot that takes no webhooks
(polling, Stream mode) all answer the webhook route alike, so the route tells an outsider
nothing about which tenants or bots exist. (Bad bodies: test_channel_body_isolation.py.)

The route itself has one entry in test_isolation.py's ID_PROBES (one per method and path, for
every kind of bot); its tenants there run no bots, so every probe of it is a miss. What a bot
kind does with another tenant's calls is probed here.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from backend.app import create_app
from backend.memory.entries import NewEntry
from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import channel_updates
from tests.channels import slack_fixtures
from tests.channels.conftest import signed
from tests.conftest import make_settings, serve
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.discord_server import FakeDiscordServer
from tests.fakes.feishu_server import FakeFeishuServer, encrypted_body, signed_headers
from tests.fakes.qq_server import FakeQQServer
from tests.fakes.qq_server import webhook_headers as qq_webhook_headers
from tests.fakes.slack_server import FakeSlackServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fakes.wecom_robot_server import FakeRobotServer
from tests.fakes.wecom_server import App as WeComApp
from tests.fakes.wecom_server import FakeWeComServer
from tests.prompt_text import prompt_text

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
    assert "acme-only" in prompt_text(acme_request)  # acme's memory reached acme's turn...
    assert "acme-only" not in repr(globex_request)  # ...and only acme's
    assert len(sessions["acme"]) == len(sessions["globex"]) == 1
    assert sessions["acme"][0] != sessions["globex"][0]


async def _sessions(app: Any, tenant_id: str) -> list[str]:
    found = await app.state.services.sessions.find(
        tenant_id=tenant_id, channel="telegram", external_key="tg:42"
    )
    return [] if found is None else [found.id]


# ---- DingTalk ------------------------------------------------------------------------------------

# Each tenant's own app: (client id, client secret, robot code).
DINGTALK_APPS = {
    "acme": ("acme-client", "acme-app-secret", "acme-robot"),
    "globex": ("globex-client", "globex-app-secret", "globex-robot"),
}
STREAM_APP = ("initech-client", "initech-app-secret", "initech-robot")
CONVERSATION = "cid-private-1"  # the fake's private conversation, in both tenants' robots
STAFF_ID = "staff-1"  # the sender (both tenants): the OpenAPI's target for a private reply
QUESTION = "what is my launch code?"


@pytest.fixture
def dingtalk(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDingTalkServer]:
    """One fake DingTalk holding each tenant's app (and initech's, for a Stream-mode robot)."""
    with FakeDingTalkServer() as server:
        for tenant, app in (*DINGTALK_APPS.items(), ("initech", STREAM_APP)):
            client_id, secret, robot_code = app
            monkeypatch.setenv(f"{tenant.upper()}_DT_ID", client_id)
            monkeypatch.setenv(f"{tenant.upper()}_DT_SECRET", secret)
            server.add_app(client_id, secret, robot_code)
        yield server


def dingtalk_robot(dingtalk: FakeDingTalkServer, tenant: str, mode: str) -> dict[str, Any]:
    robot_code = (DINGTALK_APPS.get(tenant) or STREAM_APP)[2]
    return {
        "kind": "dingtalk",
        "client_id_env": f"{tenant.upper()}_DT_ID",
        "client_secret_env": f"{tenant.upper()}_DT_SECRET",
        "robot_code": robot_code,
        "mode": mode,
        "allow_from": ["*"],
        "openapi_base_url": dingtalk.base_url,
    }


def same_message(dingtalk: FakeDingTalkServer) -> dict[str, dict[str, Any]]:
    """One private message as each tenant's robot receives it: the same msgId, conversation and
    sender ids; only the robot's own fields differ. Its session webhook has expired, so a reply
    goes by the OpenAPI with the robot's access token and robotCode, which the fake checks
    belong to one app."""
    message = dingtalk.robot_message(
        QUESTION,
        robot_code="",
        conversation_id=CONVERSATION,
        sender_staff_id=STAFF_ID,
        webhook_expires_in_s=-60,
    )
    return {
        tenant: copy.deepcopy(message)
        | {"robotCode": robot_code, "chatbotUserId": f"$:LWCP_v1:$bot-{robot_code}"}
        for tenant, (_, _, robot_code) in DINGTALK_APPS.items()
    }


def dingtalk_settings(
    database_url: str, tmp_path: Path, scope: str, tenants: dict[str, dict[str, Any]]
) -> Any:
    return make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": scope},
        tenants={tenant: {"channels": bots} for tenant, bots in tenants.items()},
    )


async def seed_memory(app: FastAPI, scope_key: str) -> None:
    """Each tenant's own fact, where its robot's private chat with Ada reads memory."""
    for tenant in DINGTALK_APPS:
        fact = NewEntry(source="manual", content=f"{tenant}-only: the launch code is {tenant}-1234")
        await app.state.services.memory.append(
            tenant_id=tenant, scope_key=scope_key, entries=[fact]
        )


async def dingtalk_session(app: FastAPI, tenant_id: str) -> tuple[str, list[tuple[str, str]]]:
    """The tenant's session of the shared conversation: its id and messages ("" and [] if none)."""
    found = await app.state.services.sessions.find(
        tenant_id=tenant_id, channel="dingtalk", external_key=f"dt:{CONVERSATION}"
    )
    if found is None:
        return "", []
    messages = await app.state.services.messages.window(
        tenant_id=tenant_id, session_id=found.id, start_id=0, limit=100
    )
    return found.id, [(m.role, m.content) for m in messages]


async def count_updates(app: FastAPI) -> int:
    async with app.state.services.database.read() as conn:
        count = await conn.execute(select(func.count()).select_from(channel_updates))
        return int(count.scalar_one())


def check_answered_apart(
    dingtalk: FakeDingTalkServer,
    provider: ScriptedProvider,
    sessions: dict[str, tuple[str, list[tuple[str, str]]]],
    *own_marks: str,
) -> None:
    """Each tenant's robot answered by its own app, from its own session and memory (its own
    `own_marks`, formatted with its id, reached its turn, and none of the other's)."""
    replies = {(s.via, s.robot_code, s.text) for s in dingtalk.sent(STAFF_ID)}
    assert replies == {
        ("batchSend", robot_code, f"{tenant} answers")
        for tenant, (_, _, robot_code) in DINGTALK_APPS.items()
    }
    assert len(dingtalk.sent()) == 2
    token_for = {r.body["appKey"] for r in dingtalk.requests if r.path.endswith("/accessToken")}
    assert token_for == {client_id for client_id, _, _ in DINGTALK_APPS.values()}

    requests = dict(zip(DINGTALK_APPS, provider.requests, strict=True))  # answered in turn
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        for mark in own_marks:
            assert mark.format(tenant) in prompt_text(requests[tenant])
            assert mark.format(other) not in repr(requests[tenant])
        assert f"{other}-1234" not in repr(requests[tenant])
        assert sessions[tenant][1] == [("user", QUESTION), ("assistant", f"{tenant} answers")]
    assert sessions["acme"][0] and sessions["acme"][0] != sessions["globex"][0]


@pytest.mark.parametrize("scope", ["tenant", "user"])
async def test_two_tenants_stream_robots_never_share_a_conversation_a_memory_or_an_app(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str, scope: str
) -> None:
    # memory.scope user: both private chats are Ada's (`dingtalk:staff-1`) in either tenant.
    robots = {
        tenant: {"dt": dingtalk_robot(dingtalk, tenant, "stream")} for tenant in DINGTALK_APPS
    }
    settings = dingtalk_settings(database_url, tmp_path, scope, robots)
    provider = ScriptedProvider(replies=["(unscripted)"])
    app = create_app(settings, provider=provider)
    messages = same_message(dingtalk)
    async with serve(app):
        await seed_memory(app, "" if scope == "tenant" else f"dingtalk:{STAFF_ID}")
        provider.push("acme answers", "globex answers")
        acks = []
        for tenant, (client_id, _, _) in DINGTALK_APPS.items():
            frame = await asyncio.to_thread(dingtalk.push, client_id, messages[tenant])
            acks.append(await asyncio.to_thread(dingtalk.wait_for_ack, frame))
            await app.state.channels.get(tenant, "dt").settle()
        sessions = {tenant: await dingtalk_session(app, tenant) for tenant in DINGTALK_APPS}
        users = {
            tenant: (
                await app.state.services.sessions.get(tenant_id=tenant, session_id=id_)
            ).user_key
            for tenant, (id_, _) in sessions.items()
        }

    assert [ack["code"] for ack in acks] == [200, 200]
    check_answered_apart(dingtalk, provider, sessions, "{}-only")
    assert users == {tenant: f"dingtalk:{STAFF_ID}" for tenant in DINGTALK_APPS}


async def test_two_tenants_callback_robots_never_share_a_secret_a_session_or_an_app(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    robots: dict[str, dict[str, Any]] = {
        tenant: {"dt": dingtalk_robot(dingtalk, tenant, "callback")} for tenant in DINGTALK_APPS
    }
    robots["initech"] = {"streamer": dingtalk_robot(dingtalk, "initech", "stream")}
    settings = dingtalk_settings(database_url, tmp_path, "tenant", robots)
    provider = ScriptedProvider(replies=["(unscripted)"])
    app = create_app(settings, provider=provider)
    messages = same_message(dingtalk)
    secret = {tenant: app_secret for tenant, (_, app_secret, _) in DINGTALK_APPS.items()}

    async with serve(app) as client:

        async def call(
            path: str, message: dict[str, Any], headers: dict[str, str]
        ) -> httpx.Response:
            return await client.post(path, content=json.dumps(message), headers=headers)

        await asyncio.to_thread(dingtalk.wait_connected, STREAM_APP[0])
        await seed_memory(app, "")
        # The same conversation's session already exists in both tenants, with a summary.
        for tenant in DINGTALK_APPS:
            session = await app.state.services.sessions.find_or_create(
                tenant_id=tenant,
                channel="dingtalk",
                external_key=f"dt:{CONVERSATION}",
                user_key=f"dingtalk:{STAFF_ID}",
            )
            await app.state.services.sessions.update(
                tenant_id=tenant, session_id=session.id, summary=f"{tenant}-summary: Ada asked"
            )
        before = {tenant: (await dingtalk_session(app, tenant))[0] for tenant in DINGTALK_APPS}

        # Signed with the other tenant's app secret, or not signed: refused, nothing kept.
        crossed = [
            await call("/channels/acme/dt", messages["acme"], signed(secret=secret["globex"])),
            await call("/channels/globex/dt", messages["globex"], signed(secret=secret["acme"])),
            await call("/channels/globex/dt", messages["globex"], {}),
        ]
        # Who exists is not told: every miss answers the same, however well signed.
        misses = [
            await call(path, messages["acme"], signed(secret=app_secret))
            for path, app_secret in (
                ("/channels/nobody/dt", secret["acme"]),
                ("/channels/acme/nobot", secret["acme"]),
                ("/channels/initech/streamer", STREAM_APP[1]),  # Stream mode takes no callbacks
                ("/channels/initech/streamer", secret["acme"]),
            )
        ]
        kept_after_refusals = await count_updates(app)
        stored_after_refusals = [(await dingtalk_session(app, t))[1] for t in DINGTALK_APPS]

        # The same message (ids and all) to both robots, each signed by its own app.
        provider.push("acme answers", "globex answers")
        for tenant in DINGTALK_APPS:
            accepted = await call(
                f"/channels/{tenant}/dt", messages[tenant], signed(secret=secret[tenant])
            )
            assert accepted.status_code == 200, accepted.text
            await app.state.channels.get(tenant, "dt").settle()
        sessions = {tenant: await dingtalk_session(app, tenant) for tenant in DINGTALK_APPS}

    assert [r.status_code for r in crossed] == [401, 401, 401]
    assert {(r.status_code, r.text) for r in misses} == {(404, misses[0].text)}
    assert misses[0].json()["error"]["code"] == "not_found"
    assert kept_after_refusals == 0 and stored_after_refusals == [[], []]
    check_answered_apart(dingtalk, provider, sessions, "{}-only", "{}-summary")
    assert {tenant: found for tenant, (found, _) in sessions.items()} == before


# ---- QQ -----------------------------------------------------------------------------------------

QQ_APPS = {"acme": ("102000101", "acme-qq-secret"), "globex": ("102000202", "globex-qq-secret")}
QQ_STREAM_APP = ("102000303", "initech-qq-secret")


@pytest.fixture
def qq(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeQQServer]:
    """One fake QQ holding each tenant's app (and initech's, for a websocket bot)."""
    with FakeQQServer() as server:
        for tenant, (app_id, secret) in {**QQ_APPS, "initech": QQ_STREAM_APP}.items():
            monkeypatch.setenv(f"{tenant.upper()}_QQ_SECRET", secret)
            server.add_app(app_id, secret)
        yield server


def qq_bot(qq: FakeQQServer, tenant: str, mode: str = "webhook") -> dict[str, Any]:
    app_id = QQ_STREAM_APP[0] if tenant == "initech" else QQ_APPS[tenant][0]
    return {
        "kind": "qq",
        "app_id": app_id,
        "app_secret_env": f"{tenant.upper()}_QQ_SECRET",
        "mode": mode,
        "allow_from": ["*"],
        "api_base_url": qq.base_url,
        "token_base_url": qq.base_url,
    }


async def test_two_tenants_qq_bots_never_share_a_chat_a_memory_or_a_secret(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bots = {tenant: {"channels": {"qb": qq_bot(qq, tenant)}} for tenant in QQ_APPS}
    bots["initech"] = {"channels": {"qws": qq_bot(qq, "initech", "websocket")}}
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"}, tenants=bots)
    provider = ScriptedProvider(replies=["(unscripted)"])
    app = create_app(settings, provider=provider)
    event = qq.private_message("what is my launch code?", user="user-42")
    body = json.dumps(event).encode()

    async def post(path: str, secret: str) -> httpx.Response:
        headers = qq_webhook_headers(secret, body)
        return await client.post(path, content=body, headers=headers)

    async with serve(app) as client:
        memory = app.state.services.memory
        fact = NewEntry(source="manual", content="acme-only: the launch code is 1234")
        await memory.append(tenant_id="acme", scope_key="", entries=[fact])
        await asyncio.to_thread(qq.wait_connected, QQ_STREAM_APP[0])

        crossed = [
            await post("/channels/acme/qb", QQ_APPS["globex"][1]),
            await post("/channels/globex/qb", QQ_APPS["acme"][1]),
        ]
        misses = [
            await post(path, QQ_APPS["acme"][1])
            for path in ("/channels/nobody/qb", "/channels/acme/nobot", "/channels/initech/qws")
        ]
        stored_after_refusals = await qq_sessions(app, "acme") + await qq_sessions(app, "globex")

        provider.push("acme answers", "globex answers")
        for tenant in QQ_APPS:  # the same event, ids and all, to both bots
            accepted = await post(f"/channels/{tenant}/qb", QQ_APPS[tenant][1])
            assert accepted.status_code == 200, accepted.text
            await app.state.channels.get(tenant, "qb").settle()
        sessions = {tenant: await qq_sessions(app, tenant) for tenant in QQ_APPS}

    assert [r.status_code for r in crossed] == [401, 401]
    assert {(r.status_code, r.text) for r in misses} == {(404, misses[0].text)}
    assert stored_after_refusals == []
    replies = {s.app_id: (s.target, s.msg_id, s.text) for s in qq.sent()}
    msg_id = event["d"]["id"]
    assert replies == {
        QQ_APPS["acme"][0]: ("user-42", msg_id, "acme answers"),
        QQ_APPS["globex"][0]: ("user-42", msg_id, "globex answers"),
    }
    acme_request, globex_request = provider.requests
    assert "acme-only" in prompt_text(acme_request) and "acme-only" not in repr(globex_request)
    assert len(sessions["acme"]) == len(sessions["globex"]) == 1
    assert sessions["acme"][0] != sessions["globex"][0]


async def qq_sessions(app: FastAPI, tenant_id: str) -> list[str]:
    found = await app.state.services.sessions.find(
        tenant_id=tenant_id, channel="qq", external_key="qb:user-42"
    )
    return [] if found is None else [found.id]


# ---- Discord ----------------------------------------------------------------------------------

DISCORD_TOKENS = {"acme": "acme-discord-token", "globex": "globex-discord-token"}


@pytest.mark.parametrize("scope", ["tenant", "user"])
async def test_two_tenants_discord_bots_never_share_a_channel_a_memory_or_a_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database_url: str, scope: str
) -> None:
    """The very same message (message, channel and author ids) dispatched to each tenant's bot:
    each answers with its own token, from its own session and memory."""
    with FakeDiscordServer() as fake:
        bots = {}
        for n, (tenant, token) in enumerate(DISCORD_TOKENS.items(), start=1):
            monkeypatch.setenv(f"{tenant.upper()}_DISCORD_TOKEN", token)
            fake.add_bot(token, user_id=f"80000000000000000{n}", username=f"{tenant}-bot")
            bots[tenant] = {
                "dc": {
                    "kind": "discord",
                    "token_env": f"{tenant.upper()}_DISCORD_TOKEN",
                    "allow_from": ["*"],
                    "api_base_url": fake.api_base_url,
                    "gateway_url": fake.gateway_url,
                }
            }
        settings = dingtalk_settings(database_url, tmp_path, scope, bots)
        provider = ScriptedProvider(replies=["(unscripted)"])
        app = create_app(settings, provider=provider)
        message = fake.message(QUESTION, channel_id="300", author_id="501")
        async with serve(app) as client:
            for token in DISCORD_TOKENS.values():
                await asyncio.to_thread(fake.wait_connected, token)
            scope_key = "" if scope == "tenant" else "discord:501"
            for tenant in DISCORD_TOKENS:
                fact = NewEntry(source="manual", content=f"{tenant}-only: code {tenant}-1234")
                await app.state.services.memory.append(
                    tenant_id=tenant, scope_key=scope_key, entries=[fact]
                )
            provider.push("acme answers", "globex answers")
            for tenant, token in DISCORD_TOKENS.items():
                await asyncio.to_thread(fake.dispatch, token, "MESSAGE_CREATE", message)
                await asyncio.to_thread(fake.wait_for_sent, 1, token=token)
                await app.state.channels.get(tenant, "dc").settle()
            sessions = {}
            for tenant in DISCORD_TOKENS:
                found = await app.state.services.sessions.find(
                    tenant_id=tenant, channel="discord", external_key="dc:300"
                )
                assert found is not None
                sessions[tenant] = found
            webhook = await client.post("/channels/acme/dc", json={"t": "MESSAGE_CREATE"})
        replies = {(s.token, s.content) for s in fake.sent("300")}
    assert replies == {(token, f"{t} answers") for t, token in DISCORD_TOKENS.items()}
    requests = dict(zip(DISCORD_TOKENS, provider.requests, strict=True))
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        assert f"{tenant}-1234" in prompt_text(requests[tenant])
        assert f"{other}-1234" not in repr(requests[tenant])
    assert sessions["acme"].id != sessions["globex"].id
    assert webhook.status_code == 404  # as an unknown bot's: the route tells nothing


# ---- Slack: each tenant's app (its own tokens and signing secret) -------------------------------

SLACK_APPS = {
    tenant: (f"xoxb-{tenant}", f"xapp-{tenant}", f"{tenant}-signing") for tenant in TENANTS
}


@pytest.fixture
def slack_apps(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, FakeSlackServer]]:
    """Each tenant's Slack app, on a fake Slack of its own (a workspace each)."""
    servers = {}
    try:
        for tenant, (bot_token, app_token, secret) in SLACK_APPS.items():
            monkeypatch.setenv(f"{tenant.upper()}_SLACK_BOT", bot_token)
            monkeypatch.setenv(f"{tenant.upper()}_SLACK_APP", app_token)
            monkeypatch.setenv(f"{tenant.upper()}_SLACK_SIGNING", secret)
            servers[tenant] = FakeSlackServer(bot_token=bot_token, app_token=app_token).start()
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def slack_bot(slack: FakeSlackServer, tenant: str, mode: str) -> dict[str, Any]:
    return {
        "kind": "slack",
        "bot_token_env": f"{tenant.upper()}_SLACK_BOT",
        "app_token_env": f"{tenant.upper()}_SLACK_APP",
        "signing_secret_env": f"{tenant.upper()}_SLACK_SIGNING",
        "mode": mode,
        "allow_from": ["*"],
        "api_base_url": slack.api_url,
    }


async def slack_session(app: FastAPI, tenant_id: str) -> list[tuple[str, str]]:
    found = await app.state.services.sessions.find(
        tenant_id=tenant_id, channel="slack", external_key="sl:D0ADA"
    )
    if found is None:
        return []
    messages = await app.state.services.messages.window(
        tenant_id=tenant_id, session_id=found.id, start_id=0, limit=100
    )
    return [(m.role, m.content) for m in messages]


@pytest.mark.parametrize("mode", ["socket", "events"])
async def test_two_tenants_slack_bots_never_share_a_chat_a_memory_or_a_secret(
    slack_apps: dict[str, FakeSlackServer], tmp_path: Path, database_url: str, mode: str
) -> None:
    """The very same event (event_id, channel D0ADA, user U0ADA) to each tenant's bot `sl`."""
    robots = {tenant: {"sl": slack_bot(slack_apps[tenant], tenant, mode)} for tenant in TENANTS}
    settings = dingtalk_settings(database_url, tmp_path, "user", robots)
    provider = ScriptedProvider(replies=["(unscripted)"])
    app = create_app(settings, provider=provider)
    event = slack_apps["acme"].event(QUESTION)
    secret = {tenant: signing for tenant, (_, _, signing) in SLACK_APPS.items()}
    async with serve(app) as client:
        for tenant in TENANTS:
            fact = NewEntry(source="manual", content=f"{tenant}-only: the code is {tenant}-1234")
            await app.state.services.memory.append(
                tenant_id=tenant, scope_key="slack:U0ADA", entries=[fact]
            )
        provider.push("acme answers", "globex answers")
        body = json.dumps(event).encode()
        crossed = await client.post(
            "/channels/acme/sl",
            content=body,
            headers=slack_fixtures.signed(body, secret=secret["globex"]),
        )
        for tenant in TENANTS:
            if mode == "socket":
                await asyncio.to_thread(slack_apps[tenant].wait_connected)
                await asyncio.to_thread(slack_apps[tenant].push, copy.deepcopy(event))
            else:
                headers = slack_fixtures.signed(body, secret=secret[tenant])
                answer = await client.post(f"/channels/{tenant}/sl", content=body, headers=headers)
                assert answer.status_code == 200
            await asyncio.to_thread(slack_apps[tenant].wait_for_sent, 1)
            await app.state.channels.get(tenant, "sl").settle()
        sessions = {tenant: await slack_session(app, tenant) for tenant in TENANTS}

    assert crossed.status_code == (401 if mode == "events" else 404)
    requests = dict(zip(TENANTS, provider.requests, strict=True))
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        (reply,) = slack_apps[tenant].sent()
        assert (reply.channel, reply.text) == ("D0ADA", f"{tenant} answers")
        assert f"{tenant}-1234" in prompt_text(requests[tenant])
        assert f"{other}-1234" not in repr(requests[tenant])
        assert sessions[tenant] == [("user", QUESTION), ("assistant", f"{tenant} answers")]


# ---- WeCom ------------------------------------------------------------------------------------

WECOM_APPS = {
    tenant: WeComApp(
        corp_id=f"ww-{tenant}-corp",
        agent_id=agent_id,
        secret=f"{tenant}-wecom-secret",
        token=f"{tenant}token",
        aes_key=(tenant * 43)[:39] + "0123",
    )
    for tenant, agent_id in (("acme", 1000001), ("globex", 1000002))
}


@pytest.fixture
def wecom(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWeComServer]:
    with FakeWeComServer() as server:
        for tenant, app in WECOM_APPS.items():
            monkeypatch.setenv(f"{tenant.upper()}_WC_SECRET", app.secret)
            monkeypatch.setenv(f"{tenant.upper()}_WC_TOKEN", app.token)
            monkeypatch.setenv(f"{tenant.upper()}_WC_AES_KEY", app.aes_key)
            server.add_app(app)
        yield server


async def test_two_tenants_wecom_apps_never_share_a_key_a_session_or_an_app(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    apps = {
        tenant: {
            "wc": {
                "kind": "wecom",
                "corp_id": app.corp_id,
                "agent_id": app.agent_id,
                "secret_env": f"{tenant.upper()}_WC_SECRET",
                "token_env": f"{tenant.upper()}_WC_TOKEN",
                "aes_key_env": f"{tenant.upper()}_WC_AES_KEY",
                "allow_from": ["*"],
                "api_base_url": wecom.base_url,
            }
        }
        for tenant, app in WECOM_APPS.items()
    }
    settings = dingtalk_settings(database_url, tmp_path, "user", apps)
    provider = ScriptedProvider(replies=["(unscripted)"])
    app = create_app(settings, provider=provider)

    def message(tenant: str) -> bytes:  # the same MsgId, sender and time for both
        return wecom.message_xml(
            QUESTION, app=WECOM_APPS[tenant], user="ada", msg_id="7000000000000000001"
        )

    async with serve(app) as client:

        async def call(path: str, signed_as: str, tenant: str) -> httpx.Response:
            query, body = wecom.callback(WECOM_APPS[signed_as], message(tenant))
            return await client.post(path, params=query, content=body)

        for tenant in WECOM_APPS:
            fact = NewEntry(source="manual", content=f"{tenant}-only: code {tenant}-1234")
            await app.state.services.memory.append(
                tenant_id=tenant, scope_key="wecom:ada", entries=[fact]
            )
        crossed = [
            await call("/channels/acme/wc", "globex", "acme"),
            await call("/channels/globex/wc", "acme", "globex"),
        ]
        misses = [
            await call("/channels/nobody/wc", "acme", "acme"),
            await call("/channels/acme/nobot", "acme", "acme"),
        ]
        kept_after_refusals = await count_updates(app)

        provider.push("acme answers", "globex answers")
        for tenant in WECOM_APPS:
            accepted = await call(f"/channels/{tenant}/wc", tenant, tenant)
            assert accepted.status_code == 200, accepted.text
            await app.state.channels.get(tenant, "wc").settle()
        sessions = {}
        for tenant in WECOM_APPS:
            found = await app.state.services.sessions.find(
                tenant_id=tenant, channel="wecom", external_key="wc:ada"
            )
            assert found is not None and found.user_key == "wecom:ada"
            window = await app.state.services.messages.window(
                tenant_id=tenant, session_id=found.id, start_id=0, limit=10
            )
            sessions[tenant] = (found.id, [(m.role, m.content) for m in window])

    assert [r.status_code for r in crossed] == [401, 401]
    assert {(r.status_code, r.text) for r in misses} == {(404, misses[0].text)}
    assert kept_after_refusals == 0
    sent = {(s.agent_id, s.to_user, s.content) for s in wecom.sent()}
    assert sent == {
        (WECOM_APPS["acme"].agent_id, "ada", "acme answers"),
        (WECOM_APPS["globex"].agent_id, "ada", "globex answers"),
    }
    requests = dict(zip(WECOM_APPS, provider.requests, strict=True))
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        assert f"{tenant}-1234" in prompt_text(requests[tenant])
        assert f"{other}-1234" not in repr(requests[tenant])
        assert sessions[tenant][1] == [("user", QUESTION), ("assistant", f"{tenant} answers")]
    assert sessions["acme"][0] != sessions["globex"][0]


async def test_two_tenants_wecom_robots_never_share_a_chat_or_a_connection(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same user and msgid to each tenant's robot (each its own long connection)."""
    with (
        FakeRobotServer("aib-acme", "acme-robot-secret") as acme,
        FakeRobotServer("aib-globex", "globex-robot-secret") as globex,
    ):
        robots = {"acme": acme, "globex": globex}
        for tenant, robot in robots.items():
            monkeypatch.setenv(f"{tenant.upper()}_WR_SECRET", robot.secret)
        bots = {
            tenant: {
                "wr": {
                    "kind": "wecom",
                    "mode": "robot",
                    "bot_id": robot.bot_id,
                    "bot_secret_env": f"{tenant.upper()}_WR_SECRET",
                    "allow_from": ["*"],
                    "ws_url": robot.url,
                }
            }
            for tenant, robot in robots.items()
        }
        settings = dingtalk_settings(database_url, tmp_path, "user", bots)
        provider = ScriptedProvider(replies=["(unscripted)"])
        app = create_app(settings, provider=provider)
        async with serve(app):
            provider.push("acme answers", "globex answers")
            for tenant, robot in robots.items():
                await asyncio.to_thread(robot.wait_connected)
                await asyncio.to_thread(robot.push, robot.message(QUESTION, msgid="same-msgid-1"))
                await asyncio.to_thread(robot.wait_for_replies, 1)
                await app.state.channels.get(tenant, "wr").settle()
            stored = {}
            for tenant in robots:
                found = await app.state.services.sessions.find(
                    tenant_id=tenant, channel="wecom", external_key="wr:ada"
                )
                assert found is not None and found.user_key == "wecom:ada"
                window = await app.state.services.messages.window(
                    tenant_id=tenant, session_id=found.id, start_id=0, limit=10
                )
                stored[tenant] = [(m.role, m.content) for m in window]
    assert [r.content for r in acme.replies()] == ["acme answers"]
    assert [r.content for r in globex.replies()] == ["globex answers"]
    for tenant in robots:
        assert stored[tenant] == [("user", QUESTION), ("assistant", f"{tenant} answers")]


# ---- Feishu -------------------------------------------------------------------------------------
# Feishu and Lark (larksuite.com) are one platform, `kind: feishu`, served through the `lark-oapi`
# SDK: its webhook is the probed `/channels/{tenant}/{bot}` route, its chat keys `feishu:<bot>:…`.

FEISHU_APPS = {  # tenant: (app id, app secret, encrypt key)
    "acme": ("cli_acme", "acme-fs-secret", "acme-fs-key"),
    "globex": ("cli_globex", "globex-fs-secret", "globex-fs-key"),
}
FEISHU_CHAT = "oc_shared_chat"


@pytest.fixture
def feishu_apps(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFeishuServer]:
    """One fake Feishu holding each tenant's app."""
    with FakeFeishuServer() as server:
        for tenant, (app_id, secret, key) in FEISHU_APPS.items():
            monkeypatch.setenv(f"{tenant.upper()}_FS_SECRET", secret)
            monkeypatch.setenv(f"{tenant.upper()}_FS_KEY", key)
            monkeypatch.setenv(f"{tenant.upper()}_FS_VERIFY", f"{tenant}-verify")
            server.add_app(app_id, secret, bot_open_id=f"ou_bot_{tenant}")
        yield server


def feishu_bot(fake: FakeFeishuServer, tenant: str, mode: str) -> dict[str, Any]:
    return {
        "kind": "feishu",
        "app_id": FEISHU_APPS[tenant][0],
        "app_secret_env": f"{tenant.upper()}_FS_SECRET",
        "encrypt_key_env": f"{tenant.upper()}_FS_KEY",
        "verification_token_env": f"{tenant.upper()}_FS_VERIFY",
        "mode": mode,
        "allow_from": ["*"],
        "base_url": fake.base_url,
    }


async def test_two_tenants_feishu_bots_never_share_a_chat_a_memory_or_an_app(
    feishu_apps: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    """The very same event (event, message, chat and sender ids) to each tenant's bot over its
    own long connection: each answers with its own app's token, from its own session and
    memory; and a webhook event encrypted and signed with one tenant's key is refused at the
    other's path."""
    bots = {tenant: {"fs": feishu_bot(feishu_apps, tenant, "websocket")} for tenant in FEISHU_APPS}
    bots["initech"] = {"hook": feishu_bot(feishu_apps, "acme", "webhook") | {"app_id": "cli_x"}}
    settings = dingtalk_settings(database_url, tmp_path, "tenant", bots)
    provider = ScriptedProvider(replies=["(unscripted)"])
    app = create_app(settings, provider=provider)
    event = feishu_apps.message_event(QUESTION, app_id="cli_acme", chat_id=FEISHU_CHAT)
    async with serve(app) as client:
        await seed_memory(app, "")
        provider.push("acme answers", "globex answers")
        for tenant, (app_id, _, _) in FEISHU_APPS.items():
            await asyncio.to_thread(feishu_apps.wait_connected, app_id)
            own = copy.deepcopy(event)
            own["header"] |= {"app_id": app_id, "token": f"{tenant}-verify"}
            frame = await asyncio.to_thread(feishu_apps.push, app_id, own)
            assert (await asyncio.to_thread(feishu_apps.wait_for_ack, frame))["code"] == 200
            await app.state.channels.get(tenant, "fs").settle()
        sessions = {}
        for tenant in FEISHU_APPS:
            found = await app.state.services.sessions.find(
                tenant_id=tenant, channel="feishu", external_key=f"fs:{FEISHU_CHAT}"
            )
            assert found is not None
            window = await app.state.services.messages.window(
                tenant_id=tenant, session_id=found.id, start_id=0, limit=10
            )
            sessions[tenant] = (found.id, [(m.role, m.content) for m in window])
        plain = json.dumps(event | {"header": event["header"] | {"token": "acme-verify"}})
        body = encrypted_body(plain.encode(), "globex-fs-key")  # globex's key, at acme's path
        crossed = await client.post(
            "/channels/initech/hook",
            content=body,
            headers=signed_headers(body, "globex-fs-key"),
        )
        kept = await count_updates(app)

    replies = {(s.app_id, s.text) for s in feishu_apps.sent()}
    assert replies == {("cli_acme", "acme answers"), ("cli_globex", "globex answers")}
    requests = dict(zip(FEISHU_APPS, provider.requests, strict=True))
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        assert f"{tenant}-only" in prompt_text(requests[tenant])
        assert f"{other}-1234" not in repr(requests[tenant])
        assert sessions[tenant][1] == [("user", QUESTION), ("assistant", f"{tenant} answers")]
    assert sessions["acme"][0] != sessions["globex"][0]
    assert crossed.status_code == 401 and kept == 2
