"""The audit log (`GET /api/admin/audit`): every administrator's action is recorded with who did
it (the operator, or an admin key by label and id), what, to which tenant and when; a tenant's
admin key reads its own tenant's entries only, a chat key none; no entry, response or log line
carries a key's secret."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.api.test_auth import ADMIN_KEY, bearer
from tests.conftest import make_settings, serve

OPERATOR = bearer(ADMIN_KEY)


async def created_key(
    client: httpx.AsyncClient, tenant: str, headers: dict[str, str], scope: str, label: str
) -> dict[str, Any]:
    response = await client.post(
        f"/api/admin/tenants/{tenant}/keys", headers=headers, json={"scope": scope, "label": label}
    )
    assert response.status_code == 201, response.text
    key: dict[str, Any] = response.json()
    return key


def actions(listing: httpx.Response) -> list[tuple[str, str, str, str]]:
    """(tenant, actor, action, target) of each entry, oldest first."""
    assert listing.status_code == 200, listing.text
    entries = reversed(listing.json()["entries"])
    return [(e["tenant_id"], e["actor"], e["action"], e["target"]) for e in entries]


async def test_each_admin_action_is_recorded_and_read_by_whom_it_concerns(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    caplog.set_level(logging.DEBUG)
    settings = make_settings(
        database_url, tmp_path, auth={"mode": "keys"}, memory={"scope": "user"}
    )
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        for tenant in ("acme", "globex"):
            made = await client.post("/api/admin/tenants", headers=OPERATOR, json={"id": tenant})
            assert made.status_code == 201, made.text
        admin = await created_key(client, "acme", OPERATOR, "admin", "acme ops")
        chat = await created_key(client, "acme", bearer(admin["key"]), "chat", "web app")
        other = await created_key(client, "globex", OPERATOR, "admin", "globex ops")
        revoked = await client.delete(f"/api/admin/keys/{chat['id']}", headers=bearer(admin["key"]))
        assert revoked.status_code == 204
        changes = [{"settings": {"persona": {"name": "Acme"}}}, {"disabled": True}]
        for change in [*changes, {"disabled": False}]:
            patched = await client.patch("/api/admin/tenants/acme", headers=OPERATOR, json=change)
            assert patched.status_code == 200, patched.text
        removed = await client.delete(
            "/api/admin/tenants/acme/links", headers=bearer(admin["key"]), params={"user": "x"}
        )  # not linked: refused, so not recorded

        everything = await client.get("/api/admin/audit", headers=OPERATOR)
        one_tenant = await client.get(
            "/api/admin/audit", headers=OPERATOR, params={"tenant_id": "globex"}
        )
        acme_sees = await client.get("/api/admin/audit", headers=bearer(admin["key"]))
        acme_asks_globex = await client.get(
            "/api/admin/audit", headers=bearer(admin["key"]), params={"tenant_id": "globex"}
        )
        newest = await client.get("/api/admin/audit", headers=OPERATOR, params={"limit": 2})
        older = await client.get(
            "/api/admin/audit",
            headers=OPERATOR,
            params={"before_id": newest.json()["entries"][-1]["id"]},
        )
        chat_key = await created_key(client, "acme", OPERATOR, "chat", "probe")
        refused = await client.get("/api/admin/audit", headers=bearer(chat_key["key"]))

    acme_admin = f"admin key acme ops ({admin['id']})"
    assert removed.status_code == 404
    assert actions(everything)[:9] == [
        ("acme", "operator", "tenant.create", ""),
        ("globex", "operator", "tenant.create", ""),
        ("acme", "operator", "key.create", admin["id"]),
        ("acme", acme_admin, "key.create", chat["id"]),
        ("globex", "operator", "key.create", other["id"]),
        ("acme", acme_admin, "key.revoke", chat["id"]),
        ("acme", "operator", "tenant.update", ""),
        ("acme", "operator", "tenant.disable", ""),
        ("acme", "operator", "tenant.enable", ""),
    ]
    (update,) = [e for e in everything.json()["entries"] if e["action"] == "tenant.update"]
    assert update["detail"] == {"renamed": False, "settings": ["persona"]}
    assert {e["tenant_id"] for e in one_tenant.json()["entries"]} == {"globex"}
    assert {e["tenant_id"] for e in acme_sees.json()["entries"]} == {"acme"}
    assert acme_asks_globex.json() == {"entries": []}
    assert len(newest.json()["entries"]) == 2
    assert older.json()["entries"][0]["id"] < newest.json()["entries"][-1]["id"]
    assert refused.status_code == 403
    secrets = [admin["key"], chat["key"], other["key"], chat_key["key"], ADMIN_KEY]
    seen = everything.text + acme_sees.text + caplog.text
    assert not [s for s in secrets if s in seen]
