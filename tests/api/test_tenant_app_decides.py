"""What a tenant's own app may decide (issue 30): any of a tenant's keys decides any of its
proposed memory lines when it leaves out `user`, and only that person's when it names one;
another tenant's key decides nothing (404). The API's own description says so, for apps."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

import httpx
import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.api.test_auth import ADMIN_KEY, bearer
from tests.conftest import make_settings, serve
from tests.memory.test_memory_proposals import remember

PERSONAL = {"memory": {"scope": "user", "confirm_writes": True}}


async def test_any_key_of_the_tenant_decides_and_user_narrows_it(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(replies=["ok"])
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"})
    async with serve(create_app(settings, provider=provider)) as client:
        keys = {}
        for tenant, count in (("acme", 2), ("other", 1)):
            created = await client.post(
                "/api/admin/tenants",
                json={"id": tenant, "settings": PERSONAL},
                headers=bearer(ADMIN_KEY),
            )
            assert created.status_code == 201, created.text
            for n in range(count):
                key = await client.post(
                    f"/api/admin/tenants/{tenant}/keys", json={}, headers=bearer(ADMIN_KEY)
                )
                keys[f"{tenant}{n}"] = bearer(key.json()["key"])
        provider.push(remember("Ada keeps bees"), "Shall I?", remember("Ada sings"), "Shall I?")
        for _ in range(2):
            sent = await client.post(
                "/api/chat/send", json={"message": "hi", "user": "ada"}, headers=keys["acme0"]
            )
            assert sent.status_code == 200, sent.text
        listed = await client.get(
            "/api/memory/proposals", params={"user": "ada"}, headers=keys["acme1"]
        )
        first, second = (p["id"] for p in listed.json()["proposals"])

        def decide(proposal: str, body: dict[str, object], key: str) -> Awaitable[httpx.Response]:
            url = f"/api/memory/proposals/{proposal}/decision"
            return client.post(url, json=body, headers=keys[key])

        from_another_tenant = await decide(first, {"approved": True}, "other0")
        naming_someone_else = await decide(first, {"approved": True, "user": "bob"}, "acme1")
        naming_her = await decide(first, {"approved": True, "user": "ada"}, "acme1")
        leaving_out_user = await decide(second, {"approved": False}, "acme1")

    assert from_another_tenant.status_code == 404
    assert naming_someone_else.status_code == 404
    assert naming_her.status_code == 200 and naming_her.json()["status"] == "approved"
    assert leaving_out_user.status_code == 200  # the tenant's app answers for its people
    assert leaving_out_user.json()["status"] == "discarded"


async def test_the_api_description_says_what_a_tenants_app_decides(
    sqlite_url: str, tmp_path: Path
) -> None:
    async with serve(create_app(make_settings(sqlite_url, tmp_path))) as client:
        paths = (await client.get("/openapi.json")).json()["paths"]
    for path in (
        "/api/chat/turns/{turn_id}/approvals",
        "/api/memory/proposals/{proposal_id}/decision",
    ):
        described = paths[path]["post"]["description"]
        assert "the tenant's app's call" in described, path
        assert "Only JSON `true`" in described, path
