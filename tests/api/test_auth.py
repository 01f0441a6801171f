"""API keys: tenants and keys administered, every bad key the same 401, nothing recoverable."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import api_keys
from tests.conftest import make_settings, serve

ADMIN_KEY = "operator-secret-for-tests"
UNAUTHORIZED = {
    "error": {
        "code": "unauthorized",
        "message": "a valid API key is required (Authorization: Bearer <key>)",
    }
}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def keyed(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"})
    app = create_app(settings, provider=ScriptedProvider(replies=["hi"]))
    async with serve(app) as client:
        yield client, app


async def make_tenant(
    client: httpx.AsyncClient, tenant_id: str, scope: str = "chat"
) -> dict[str, Any]:
    created = await client.post(
        "/api/admin/tenants",
        json={"id": tenant_id, "name": tenant_id.title()},
        headers=bearer(ADMIN_KEY),
    )
    assert created.status_code in (201, 409), created.text
    key = await client.post(
        f"/api/admin/tenants/{tenant_id}/keys",
        json={"scope": scope, "label": "test"},
        headers=bearer(ADMIN_KEY),
    )
    assert key.status_code == 201, key.text
    body: dict[str, Any] = key.json()
    return body


async def test_a_tenant_key_chats_and_the_operator_manages(
    keyed: tuple[httpx.AsyncClient, Any],
) -> None:
    client, _ = keyed
    key = await make_tenant(client, "acme")
    assert key["key"].startswith("tly_") and key["tenant_id"] == "acme"
    reply = await client.post(
        "/api/chat/send", json={"message": "hello"}, headers=bearer(key["key"])
    )
    assert reply.status_code == 200 and reply.json()["reply"] == "hi"
    tenants = (await client.get("/api/admin/tenants", headers=bearer(ADMIN_KEY))).json()
    assert {t["id"] for t in tenants["tenants"]} == {"default", "acme"}
    keys = (await client.get("/api/admin/tenants/acme/keys", headers=bearer(ADMIN_KEY))).json()
    assert [k["id"] for k in keys["keys"]] == [key["id"]]
    assert "key" not in keys["keys"][0] and keys["keys"][0]["last_used_at"] is not None


async def test_every_bad_key_gets_the_same_401(keyed: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = keyed
    key = await make_tenant(client, "acme")
    revoked = await make_tenant(client, "acme")
    assert (
        await client.delete(f"/api/admin/keys/{revoked['id']}", headers=bearer(ADMIN_KEY))
    ).status_code == 204
    real = key["key"]
    attempts: list[dict[str, Any]] = [
        {},
        {"Authorization": real},  # no scheme
        {"Authorization": "Basic " + real},
        {"Authorization": "Bearer"},
        bearer("tly_aaaaaaaa_" + "x" * 43),  # well-formed, unknown
        bearer(real[:-1] + ("A" if real[-1] != "A" else "B")),  # right prefix, wrong secret
        bearer(revoked["key"]),
        {"Authorization": "Bearer tly_ключ".encode()},  # non-ASCII bytes
        bearer("x" * 5000),
    ]
    for headers in attempts:
        response = await client.get("/api/chat/sessions", headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.json() == UNAUTHORIZED


async def test_scopes_and_tenants_are_enforced(keyed: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = keyed
    chat_key = (await make_tenant(client, "acme"))["key"]
    admin_key = (await make_tenant(client, "acme", scope="admin"))["key"]
    other = await make_tenant(client, "globex")
    chat_on_admin = await client.get("/api/admin/tenants", headers=bearer(chat_key))
    operator_on_chat = await client.get("/api/chat/sessions", headers=bearer(ADMIN_KEY))
    own_keys = await client.post("/api/admin/tenants/acme/keys", json={}, headers=bearer(admin_key))
    other_keys = await client.post(
        "/api/admin/tenants/globex/keys", json={}, headers=bearer(admin_key)
    )
    revoke_other = await client.delete(f"/api/admin/keys/{other['id']}", headers=bearer(admin_key))
    new_tenant = await client.post(
        "/api/admin/tenants", json={"id": "mine"}, headers=bearer(admin_key)
    )
    assert (chat_on_admin.status_code, chat_on_admin.json()["error"]["code"]) == (403, "forbidden")
    assert operator_on_chat.status_code == 403
    assert own_keys.status_code == 201
    assert (other_keys.status_code, other_keys.json()["error"]["code"]) == (404, "tenant_not_found")
    assert revoke_other.status_code == 404
    assert new_tenant.status_code == 403


async def test_a_disabled_tenant_and_a_revoked_key_stop_at_once(
    keyed: tuple[httpx.AsyncClient, Any],
) -> None:
    client, _ = keyed
    key = await make_tenant(client, "acme")
    assert (await client.get("/api/chat/sessions", headers=bearer(key["key"]))).status_code == 200
    await client.patch(
        "/api/admin/tenants/acme", json={"disabled": True}, headers=bearer(ADMIN_KEY)
    )
    refused = await client.get("/api/chat/sessions", headers=bearer(key["key"]))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "tenant_disabled"
    guessed = key["key"][:-4] + "AAAA"  # the prefix of a disabled tenant's key, a wrong secret
    assert (await client.get("/api/chat/sessions", headers=bearer(guessed))).status_code == 401
    await client.patch(
        "/api/admin/tenants/acme", json={"disabled": False}, headers=bearer(ADMIN_KEY)
    )
    assert (await client.get("/api/chat/sessions", headers=bearer(key["key"]))).status_code == 200
    await client.delete(f"/api/admin/keys/{key['id']}", headers=bearer(ADMIN_KEY))
    assert (await client.get("/api/chat/sessions", headers=bearer(key["key"]))).status_code == 401


async def test_only_true_disables_a_tenant_and_a_scope_is_named_exactly(
    keyed: tuple[httpx.AsyncClient, Any],
) -> None:
    """Fields that authorise take no look-alikes: `"disabled": "no"` was read as false (and
    enabled a tenant), `"yes"` as true; a scope is `chat` or `admin`, nothing near."""
    client, _ = keyed
    key = await make_tenant(client, "acme")
    admin = bearer(ADMIN_KEY)
    await client.patch("/api/admin/tenants/acme", json={"disabled": True}, headers=admin)
    look_alikes = [
        await client.patch("/api/admin/tenants/acme", json={"disabled": value}, headers=admin)
        for value in ("no", "false", 0, "yes")
    ]
    still_disabled = await client.get("/api/chat/sessions", headers=bearer(key["key"]))
    scopes = [
        await client.post("/api/admin/tenants/acme/keys", json={"scope": s}, headers=admin)
        for s in ("ADMIN", "admin ", ["admin"], 1)
    ]
    assert [r.status_code for r in look_alikes] == [422] * 4
    assert still_disabled.status_code == 403
    assert [r.status_code for r in scopes] == [422] * 4


async def test_keys_are_not_recoverable_from_the_database(
    keyed: tuple[httpx.AsyncClient, Any],
) -> None:
    client, app = keyed
    key = await make_tenant(client, "acme")
    async with app.state.services.database.read() as conn:
        (row,) = (await conn.execute(select(api_keys).where(api_keys.c.id == key["id"]))).all()
    stored = " ".join(str(value) for value in row)
    secret = key["key"].split("_", 2)[2]
    assert secret not in stored and key["key"] not in stored
    assert row.hash != key["key"] and len(row.hash) == 64


async def test_bad_tenant_ids_and_settings_are_refused(
    keyed: tuple[httpx.AsyncClient, Any],
) -> None:
    client, _ = keyed
    bad_id = await client.post(
        "/api/admin/tenants", json={"id": "../etc"}, headers=bearer(ADMIN_KEY)
    )
    bad_settings = await client.post(
        "/api/admin/tenants",
        json={"id": "acme", "settings": {"persona": {"max_history_messages": 0}}},
        headers=bearer(ADMIN_KEY),
    )
    path_override = await client.post(
        "/api/admin/tenants",
        json={"id": "acme", "settings": {"memory": {"path": "/etc/passwd"}}},
        headers=bearer(ADMIN_KEY),
    )
    assert (bad_id.status_code, bad_id.json()["error"]["code"]) == (422, "invalid_tenant_id")
    assert bad_settings.status_code == 422
    assert "persona.max_history_messages" in bad_settings.json()["error"]["message"]
    assert "operator only" in path_override.json()["error"]["message"]


async def test_localhost_is_not_trusted_when_keys_are_on(
    keyed: tuple[httpx.AsyncClient, Any],
) -> None:
    client, _ = keyed
    for path in ("/api/chat/sessions", "/api/memory", "/api/admin/tenants"):
        assert (await client.get(path)).status_code == 401
    assert (await client.get("/api/health")).status_code == 200
