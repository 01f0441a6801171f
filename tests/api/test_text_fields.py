"""Text no backend can store (a NUL, a lone surrogate) is 422 `invalid_text` in every free-text
field, on SQLite and PostgreSQL alike, and nothing is stored. (`/v1`'s session names refuse
every control character with 400 `invalid_session`: tests/api/test_openai_compat.py.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve

ADMIN_KEY = "operator-secret-for-tests"
OPERATOR = {"Authorization": f"Bearer {ADMIN_KEY}"}
BAD_TEXTS = ["nul\x00inside", "lone \ud800 surrogate"]


@pytest.fixture
async def client(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"})
    async with serve(create_app(settings, provider=ScriptedProvider(replies=["hi"]))) as served:
        served.headers.update(OPERATOR)
        created = await served.post("/api/admin/tenants", json={"id": "acme", "name": "Acme"})
        assert created.status_code == 201, created.text
        key = (await served.post("/api/admin/tenants/acme/keys", json={"label": "k"})).json()
        served.headers["Authorization"] = f"Bearer {key['key']}"
        yield served


def refusals(session_id: str, bad: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, keyword arguments) of every request carrying `bad` as free text."""
    return [
        ("POST", "/api/chat/sessions", {"json": {"title": bad}}),
        ("PATCH", f"/api/chat/sessions/{session_id}", {"json": {"title": bad}}),
        ("PUT", f"/api/chat/sessions/{session_id}/summary", {"json": {"summary": bad}}),
        ("GET", "/api/chat/sessions", {"params": {"q": bad}}),
        ("PUT", "/api/memory", {"json": {"content": bad}}),
        ("POST", "/api/memory/entries", {"json": {"content": bad}}),
        ("GET", "/api/memory/entries", {"params": {"q": bad}}),
        ("GET", "/api/memory", {"params": {"user": bad}}),
        ("POST", "/api/chat/send", {"json": {"session_id": session_id, "message": bad}}),
        ("POST", "/api/admin/tenants", {"json": {"id": "evil", "name": bad}, "operator": True}),
        ("PATCH", "/api/admin/tenants/acme", {"json": {"name": bad}, "operator": True}),
        ("POST", "/api/admin/tenants/acme/keys", {"json": {"label": bad}, "operator": True}),
    ]


@pytest.mark.parametrize("bad", BAD_TEXTS)
async def test_unstorable_text_is_invalid_text_everywhere_and_stores_nothing(
    client: httpx.AsyncClient, bad: str
) -> None:
    session = (await client.post("/api/chat/sessions", json={"title": "kept"})).json()
    before = await stored_state(client, session["id"])
    for method, path, arguments in refusals(session["id"], bad):
        headers = OPERATOR if arguments.pop("operator", False) else {}
        if "json" in arguments:  # JSON's \ud800 escape: how a lone surrogate arrives
            headers = {**headers, "content-type": "application/json"}
            arguments = {"content": json.dumps(arguments["json"])}
        elif "\ud800" in bad:
            continue  # a URL cannot carry a lone surrogate (it is not UTF-8)
        response = await client.request(method, path, headers=headers, **arguments)
        assert response.status_code == 422, (method, path, response.text)
        assert response.json()["error"]["code"] == "invalid_text", (method, path, response.text)
    assert await stored_state(client, session["id"]) == before


async def stored_state(client: httpx.AsyncClient, session_id: str) -> list[Any]:
    tenants = (await client.get("/api/admin/tenants", headers=OPERATOR)).json()
    keys = (await client.get("/api/admin/tenants/acme/keys", headers=OPERATOR)).json()
    return [
        (await client.get("/api/chat/sessions")).json(),
        (await client.get(f"/api/chat/sessions/{session_id}/messages")).json(),
        (await client.get("/api/memory")).json(),
        [(t["id"], t["name"]) for t in tenants["tenants"]],
        [k["label"] for k in keys["keys"]],
    ]
