"""Tenant isolation for chat channels' bodies: a bad body delivered with one tenant's proof
(its bot's secret token, its app's signature) is recorded as refused under that tenant's bot
only; the same body with the other tenant's proof at its path is 401 and recorded nowhere; and
no tenant's refusal dedupes another's (the same body to both bots is two records)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from backend.app import create_app
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
from tests.fakes.wecom_server import FakeWeComServer
from tests.isolation.test_channel_isolation import (
    DINGTALK_APPS,
    DISCORD_TOKENS,
    FEISHU_APPS,
    QQ_APPS,
    SECRETS,
    SLACK_APPS,
    TENANTS,
    WECOM_APPS,
    _sessions,
    dingtalk,
    dingtalk_robot,
    feishu_apps,
    feishu_bot,
    qq,
    qq_bot,
    same_message,
    slack_apps,
    slack_bot,
    telegram,
    webhook_bot,
    wecom,
)
from tests.waiting import until

__all__ = [
    "dingtalk",
    "feishu_apps",
    "qq",
    "slack_apps",
    "telegram",
    "wecom",
]  # the fixtures, shared with test_channel_isolation.py


async def updates_by_tenant(app: FastAPI) -> dict[str, list[tuple[str, str]]]:
    async with app.state.services.database.read() as conn:
        rows = await conn.execute(
            select(channel_updates.c.tenant_id, channel_updates.c.bot, channel_updates.c.status)
        )
        found: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            found.setdefault(row.tenant_id, []).append((row.bot, row.status))
        return {tenant: sorted(rows) for tenant, rows in found.items()}


BAD_TELEGRAM_BODIES = [
    b'{"update_id": 1e400}',
    b"[" * 5_000 + b"]" * 5_000,
    b'{"update_id": 7, "message": "no message"}',
]


async def test_bad_bodies_to_one_tenants_bot_are_refused_there_and_nowhere_else(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        tenants={
            tenant: {
                "channels": {
                    "tg": webhook_bot(telegram, tenant),
                    "dt": dingtalk_robot(dingtalk, tenant, "callback"),
                }
            }
            for tenant in TENANTS
        },
    )
    app = create_app(settings, provider=ScriptedProvider(replies=["(unscripted)"]))
    app_secret = {tenant: app_secret for tenant, (_, app_secret, _) in DINGTALK_APPS.items()}
    bad_dingtalk = json.dumps(same_message(dingtalk)["acme"] | {"createAt": "soon"}).encode()
    async with serve(app) as client:
        tg = "X-Telegram-Bot-Api-Secret-Token"
        crossed = [
            await client.post("/channels/acme/tg", content=body, headers={tg: SECRETS["globex"]})
            for body in BAD_TELEGRAM_BODIES
        ] + [
            await client.post(
                "/channels/acme/dt",
                content=bad_dingtalk,
                headers=signed(secret=app_secret["globex"]),
            )
        ]
        after_crossed = await updates_by_tenant(app)
        own = [
            await client.post("/channels/acme/tg", content=body, headers={tg: SECRETS["acme"]})
            for body in BAD_TELEGRAM_BODIES
        ] + [
            await client.post(
                "/channels/acme/dt", content=bad_dingtalk, headers=signed(secret=app_secret["acme"])
            )
        ]
        after_own = await updates_by_tenant(app)
        theirs = [
            await client.post("/channels/globex/tg", content=body, headers={tg: SECRETS["globex"]})
            for body in BAD_TELEGRAM_BODIES
        ]
        after_theirs = await updates_by_tenant(app)
        sessions = [await _sessions(app, tenant) for tenant in TENANTS]

    assert [r.status_code for r in crossed] == [401] * 4 and after_crossed == {}
    assert [r.status_code for r in own] == [200] * 4 and all("refused" in r.json() for r in own)
    assert after_own == {"acme": [("dt", "refused")] + [("tg", "refused")] * 3}
    assert [r.status_code for r in theirs] == [200] * 3
    assert after_theirs["globex"] == [("tg", "refused")] * 3
    assert after_theirs["acme"] == after_own["acme"]
    assert sessions == [[], []]


async def test_bad_qq_bodies_are_refused_under_the_signing_tenants_bot_only(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    bots = {tenant: {"channels": {"qb": qq_bot(qq, tenant)}} for tenant in QQ_APPS}
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"}, tenants=bots)
    app = create_app(settings, provider=ScriptedProvider(replies=["(unscripted)"]))
    event = qq.private_message("hello")
    bad = json.dumps(event | {"d": event["d"] | {"content": {"not": "text"}}}).encode()
    secret = {tenant: app_secret for tenant, (_, app_secret) in QQ_APPS.items()}
    async with serve(app) as client:

        async def post(tenant: str, signer: str) -> int:
            headers = qq_webhook_headers(secret[signer], bad)
            answer = await client.post(f"/channels/{tenant}/qb", content=bad, headers=headers)
            return answer.status_code

        crossed = await post("acme", "globex")
        after_crossed = await updates_by_tenant(app)
        own = await post("acme", "acme")
        theirs = await post("globex", "globex")
        after = await updates_by_tenant(app)
    assert crossed == 401 and after_crossed == {}
    assert own == theirs == 200
    assert after == {"acme": [("qb", "refused")], "globex": [("qb", "refused")]}


async def test_bad_slack_bodies_are_refused_under_the_signing_tenant_only(
    slack_apps: dict[str, FakeSlackServer], tmp_path: Path, database_url: str
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        tenants={
            tenant: {"channels": {"sl": slack_bot(slack_apps[tenant], tenant, "events")}}
            for tenant in TENANTS
        },
    )
    app = create_app(settings, provider=ScriptedProvider(replies=["(unscripted)"]))
    secret = {tenant: signing for tenant, (_, _, signing) in SLACK_APPS.items()}
    bodies = [b'{"event_id": 1e400}', b"[" * 5_000 + b"]" * 5_000, b'{"type": "nothing"}']

    def signed_by(tenant: str, body: bytes) -> dict[str, str]:
        return slack_fixtures.signed(body, secret=secret[tenant])

    async with serve(app) as client:
        crossed = [
            await client.post("/channels/acme/sl", content=b, headers=signed_by("globex", b))
            for b in bodies
        ]
        after_crossed = await updates_by_tenant(app)
        own = [
            await client.post("/channels/acme/sl", content=b, headers=signed_by("acme", b))
            for b in bodies
        ]
        theirs = [
            await client.post("/channels/globex/sl", content=b, headers=signed_by("globex", b))
            for b in bodies
        ]
        after = await updates_by_tenant(app)
    assert [r.status_code for r in crossed] == [401] * 3 and after_crossed == {}
    assert [r.status_code for r in own + theirs] == [200] * 6
    assert all("refused" in r.json() for r in own + theirs)
    assert after == {tenant: [("sl", "refused")] * 3 for tenant in TENANTS}


async def test_a_bad_discord_dispatch_is_refused_under_each_tenants_bot_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database_url: str
) -> None:
    """Discord has no webhook: a bad dispatch comes on a tenant's own gateway session. The same
    bad dispatch to both tenants' bots is two records, each under its own tenant and bot; one to
    acme's bot alone is recorded under acme only."""
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
        settings = make_settings(
            database_url,
            tmp_path,
            auth={"mode": "keys"},
            tenants={tenant: {"channels": channels} for tenant, channels in bots.items()},
        )
        app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
        shared = {**fake.message("x"), "content": {"not": "text"}}
        acme_only = {**fake.message("y"), "author": "nobody"}
        async with serve(app):
            for token in DISCORD_TOKENS.values():
                await asyncio.to_thread(fake.wait_connected, token)
                await asyncio.to_thread(fake.dispatch, token, "MESSAGE_CREATE", shared)
            await asyncio.to_thread(
                fake.dispatch, DISCORD_TOKENS["acme"], "MESSAGE_CREATE", acme_only
            )
            found = await recorded(app, 3)
    assert found == {
        "acme": [("dc", "refused"), ("dc", "refused")],
        "globex": [("dc", "refused")],
    }


async def recorded(app: FastAPI, count: int) -> dict[str, list[tuple[str, str]]]:
    """The updates by tenant, once `count` are recorded in all."""

    async def enough() -> dict[str, list[tuple[str, str]]] | None:
        found = await updates_by_tenant(app)
        return found if sum(map(len, found.values())) >= count else None

    return await until(enough, f"{count} updates recorded")


async def test_bad_wecom_messages_to_one_tenants_app_are_refused_there_and_nowhere_else(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    apps = {
        tenant: {
            "channels": {
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
        }
        for tenant, app in WECOM_APPS.items()
    }
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"}, tenants=apps)
    app = create_app(settings, provider=ScriptedProvider(replies=["(unscripted)"]))

    def bad(tenant: str) -> bytes:  # the same MsgId for both; a time that is no number
        message = wecom.message_xml("hi", app=WECOM_APPS[tenant], msg_id="7000000000000000002")
        return message.replace(b"<CreateTime>", b"<CreateTime>soon")

    async with serve(app) as client:

        async def call(path_tenant: str, signed_as: str) -> int:
            query, body = wecom.callback(WECOM_APPS[signed_as], bad(path_tenant))
            answer = await client.post(f"/channels/{path_tenant}/wc", params=query, content=body)
            return answer.status_code

        crossed = [await call("acme", "globex"), await call("globex", "acme")]
        after_crossed = await updates_by_tenant(app)
        own = await call("acme", "acme")
        after_own = await updates_by_tenant(app)
        theirs = await call("globex", "globex")
        after_theirs = await updates_by_tenant(app)
        sessions = [await _sessions(app, tenant) for tenant in TENANTS]

    assert crossed == [401, 401] and after_crossed == {}
    assert own == 200 and after_own == {"acme": [("wc", "refused")]}
    assert theirs == 200 and after_theirs == {
        "acme": [("wc", "refused")],
        "globex": [("wc", "refused")],
    }
    assert sessions == [[], []]


async def test_bad_feishu_bodies_to_one_tenants_bot_are_refused_there_and_nowhere_else(
    feishu_apps: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    """Encrypted and signed with one tenant's Encrypt Key: refused under that tenant's bot;
    with the other's at its path: 401, recorded nowhere; the same body to both: two records."""
    settings = make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        tenants={
            tenant: {"channels": {"fs": feishu_bot(feishu_apps, tenant, "webhook")}}
            for tenant in FEISHU_APPS
        },
    )
    app = create_app(settings, provider=ScriptedProvider(replies=["(unscripted)"]))
    bad = [b"{nope", b"[" * 5_000 + b"]" * 5_000, b'{"schema": "2.0", "header": 7}']
    key = {tenant: encrypt_key for tenant, (_, _, encrypt_key) in FEISHU_APPS.items()}

    async def post(tenant: str, body: bytes, with_key: str) -> int:
        encrypted = encrypted_body(body, with_key)
        headers = signed_headers(encrypted, with_key)
        answer = await client.post(f"/channels/{tenant}/fs", content=encrypted, headers=headers)
        return answer.status_code

    async with serve(app) as client:
        crossed = [await post("acme", body, key["globex"]) for body in bad]
        after_crossed = await updates_by_tenant(app)
        own = [await post("acme", body, key["acme"]) for body in bad]
        theirs = [await post("globex", body, key["globex"]) for body in bad]
        after = await updates_by_tenant(app)
    assert crossed == [401] * 3 and after_crossed == {}
    assert own == theirs == [200] * 3
    assert after == {tenant: [("fs", "refused")] * 3 for tenant in FEISHU_APPS}
