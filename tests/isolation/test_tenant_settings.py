"""Per-tenant settings reach the model: two tenants with different personas, windows and models
get different system prompts, windows and upstream models, shown against the fake OpenAI
server. Overrides come from config.yaml's `tenants:` and from the admin API, and a PATCH takes
effect on the next turn. A tenant's `system_template` names a file inside prompts/, nothing else.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.errors import ConfigError
from backend.settings import Settings
from tests.api.test_auth import ADMIN_KEY, bearer
from tests.conftest import ROOT, make_settings, serve
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.summarizer import EchoSummarizer
from tests.isolation.conftest import OPERATOR

BASE_WINDOW = 4
CUSTOM_TEMPLATE = "tenant_system.md.j2"
CUSTOM_TEMPLATE_TEXT = "You are {{ persona.name }}, from a tenant's own template."
UNSAFE_TEMPLATES = [
    "../x",
    "../prompts/system.md.j2",
    "/etc/passwd",
    "sub/system.md.j2",
    "..\\x",
    ".hidden.md.j2",
]


@dataclass(frozen=True)
class Expected:
    """What a tenant's upstream requests must carry."""

    model: str
    persona: str
    window: int
    language: str = "en"


@dataclass
class Conversation:
    """One session of one tenant; each turn returns the upstream request bodies it caused."""

    client: httpx.AsyncClient
    app: FastAPI
    server: FakeOpenAIServer
    key: str
    session_id: str = ""

    async def turn(self, message: str) -> list[dict[str, Any]]:
        headers = bearer(self.key)
        if not self.session_id:
            created = await self.client.post("/api/chat/sessions", headers=headers, json={})
            self.session_id = created.json()["id"]
        first = len(self.server.requests)
        response = await self.client.post(
            "/api/chat/send",
            headers=headers,
            json={"session_id": self.session_id, "message": message},
        )
        assert response.status_code == 200, response.text
        await self.app.state.services.runtimes.wait_idle()
        return [
            request.body
            for request in self.server.requests[first:]
            if request.path == "/v1/chat/completions"
        ]

    async def model_listed(self) -> str:
        models = await self.client.get("/v1/models", headers=bearer(self.key))
        (card,) = models.json()["data"]
        return str(card["id"])


def check_requests(bodies: list[dict[str, Any]], expected: Expected, *, last: str) -> None:
    """Every request names the tenant's model and persona, holds at most its window of history
    before the newest user message, and the window is reached (so it is not just smaller)."""
    assert bodies, "no upstream request"
    for body in bodies:
        system, *history, newest = body["messages"]
        assert body["model"] == expected.model
        assert system["role"] == "system"
        assert f"You are {expected.persona}, a helpful assistant." in system["content"]
        assert ("简体中文" in system["content"]) == (expected.language == "zh")
        assert len(history) <= expected.window, (expected, history)
        assert newest["role"] == "user"
    assert max(len(body["messages"]) - 2 for body in bodies) == expected.window
    newest = bodies[-1]["messages"][-1]
    assert newest["role"] == "user"
    assert newest["content"].startswith(f"{last}\n\n<turn-context>")  # the time comes after it


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def fake_settings(database_url: str, tmp_path: Path, base_url: str, **overrides: Any) -> Settings:
    return make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        providers={"fake": {"kind": "openai_compatible", "base_url": base_url, "max_retries": 0}},
        model={"provider": "fake", "name": "base-model"},
        persona={"max_history_messages": BASE_WINDOW},
        **overrides,
    )


@pytest.fixture
async def served(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeOpenAIServer,
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """Tally in keys mode on the fake server; acme's overrides come from config.yaml. A private
    copy of prompts/ holds a tenant's own template."""
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    prompts = tmp_path / "prompts"
    shutil.copytree(ROOT / "prompts", prompts)
    (prompts / CUSTOM_TEMPLATE).write_text(CUSTOM_TEMPLATE_TEXT, encoding="utf-8")
    settings = fake_settings(
        database_url,
        tmp_path,
        fake_openai.base_url,
        prompts_dir=str(prompts),
        tenants={
            "acme": {
                "persona": {"name": "Acme Bot", "max_history_messages": 2},
                "model": {"provider": "fake", "name": "acme-model"},
            }
        },
    )
    # The summarizer is kept off the fake server, so it records chat requests only.
    app = create_app(settings, summarizer_provider=EchoSummarizer())
    async with serve(app) as client:
        yield client, app


async def add_tenant(
    client: httpx.AsyncClient, tenant_id: str, settings: dict[str, Any] | None = None
) -> str:
    """A tenant (with admin-API overrides, if any) and its chat key; a tenant config.yaml
    names exists from the start and only gets its key."""
    listed = (await client.get("/api/admin/tenants", headers=OPERATOR)).json()["tenants"]
    if tenant_id not in {tenant["id"] for tenant in listed}:
        body: dict[str, Any] = {"id": tenant_id} | ({"settings": settings} if settings else {})
        created = await client.post("/api/admin/tenants", headers=OPERATOR, json=body)
        assert created.status_code == 201, created.text
    key = await client.post(f"/api/admin/tenants/{tenant_id}/keys", headers=OPERATOR, json={})
    assert key.status_code == 201, key.text
    return str(key.json()["key"])


async def test_tenants_get_their_own_persona_window_and_model_upstream(
    served: tuple[httpx.AsyncClient, FastAPI], fake_openai: FakeOpenAIServer
) -> None:
    client, app = served
    globex_settings = {
        "persona": {"name": "Globex Helper", "language": "zh", "max_history_messages": 6},
        "model": {"provider": "fake", "name": "globex-model"},
    }
    chats = {
        tenant_id: Conversation(client, app, fake_openai, await add_tenant(client, tenant_id, s))
        for tenant_id, s in (("acme", None), ("globex", globex_settings), ("initech", None))
    }
    expected = {
        "acme": Expected("acme-model", "Acme Bot", 2),  # from config.yaml
        "globex": Expected("globex-model", "Globex Helper", 6, "zh"),  # from the admin API
        "initech": Expected("base-model", "Tally", BASE_WINDOW),  # no overrides
    }
    bodies: dict[str, list[dict[str, Any]]] = {tenant_id: [] for tenant_id in chats}
    for i in range(5):  # interleaved, so one tenant's runtime cannot stand in for another's
        for tenant_id, chat in chats.items():
            bodies[tenant_id] += await chat.turn(f"{tenant_id} turn {i}")
    for tenant_id, chat in chats.items():
        check_requests(bodies[tenant_id], expected[tenant_id], last=f"{tenant_id} turn 4")
        assert await chat.model_listed() == expected[tenant_id].model

    patched = await client.patch(
        "/api/admin/tenants/globex",
        headers=OPERATOR,
        json={
            "settings": {
                "persona": {"name": "Globex Concierge", "max_history_messages": 2},
                "model": {"provider": "fake", "name": "globex-model-v2"},
            }
        },
    )
    assert patched.status_code == 200, patched.text
    after_patch = await chats["globex"].turn("globex after the patch")
    unchanged = await chats["acme"].turn("acme after globex's patch")
    # The stored window holds more than the new 2 messages of history: the cut shows at once.
    check_requests(
        after_patch,
        Expected("globex-model-v2", "Globex Concierge", 2),
        last="globex after the patch",
    )
    check_requests(unchanged, expected["acme"], last="acme after globex's patch")
    assert await chats["globex"].model_listed() == "globex-model-v2"


async def test_a_tenants_own_system_template_is_used(
    served: tuple[httpx.AsyncClient, FastAPI], fake_openai: FakeOpenAIServer
) -> None:
    client, app = served
    key = await add_tenant(
        client,
        "umbrella",
        {"persona": {"name": "Umbrella Aide", "system_template": CUSTOM_TEMPLATE}},
    )
    other = await add_tenant(client, "initech")
    (own,) = await Conversation(client, app, fake_openai, key).turn("hello")
    (base,) = await Conversation(client, app, fake_openai, other).turn("hello")
    assert own["messages"][0]["content"] == "You are Umbrella Aide, from a tenant's own template.\n"
    assert base["messages"][0]["content"].startswith("# Identity\n\nYou are Tally,")


@pytest.mark.parametrize("template", UNSAFE_TEMPLATES)
async def test_a_system_template_outside_prompts_is_refused(
    served: tuple[httpx.AsyncClient, FastAPI], template: str
) -> None:
    client, _ = served
    await add_tenant(client, "umbrella")
    overrides = {"persona": {"system_template": template}}
    created = await client.post(
        "/api/admin/tenants", headers=OPERATOR, json={"id": "evil", "settings": overrides}
    )
    patched = await client.patch(
        "/api/admin/tenants/umbrella", headers=OPERATOR, json={"settings": overrides}
    )
    tenants = (await client.get("/api/admin/tenants", headers=OPERATOR)).json()["tenants"]
    for refused in (created, patched):
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "invalid_settings"
        assert "persona.system_template" in refused.json()["error"]["message"]
    assert {t["id"]: t["settings"] for t in tenants}["umbrella"] == {}
    assert "evil" not in {t["id"] for t in tenants}


@pytest.mark.parametrize("template", UNSAFE_TEMPLATES)
def test_a_system_template_outside_prompts_stops_config_yaml(
    sqlite_url: str, tmp_path: Path, template: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        fake_settings(
            sqlite_url,
            tmp_path,
            "http://127.0.0.1:9/v1",  # never called: the settings do not parse
            tenants={"acme": {"persona": {"system_template": template}}},
        )
    assert refused.value.message.startswith("test: invalid configuration")
    assert "tenants.acme.persona.system_template: " in refused.value.message


async def test_a_system_template_missing_from_prompts_is_refused(
    served: tuple[httpx.AsyncClient, FastAPI],
) -> None:
    client, _ = served
    key = await add_tenant(client, "umbrella")
    refusals = []
    for template in ("missing.md.j2", "overflow_summary.md.j2"):  # absent; not a system prompt
        overrides = {"persona": {"system_template": template}}
        refusals.append(
            await client.post(
                "/api/admin/tenants", headers=OPERATOR, json={"id": "evil", "settings": overrides}
            )
        )
        refusals.append(
            await client.patch(
                "/api/admin/tenants/umbrella", headers=OPERATOR, json={"settings": overrides}
            )
        )
    sessions = await client.get("/api/chat/sessions", headers=bearer(key))
    for refused in refusals:
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "invalid_settings"
        assert "/tmp" not in refused.json()["error"]["message"]  # no server paths
    assert sessions.status_code == 200, sessions.text  # the tenant keeps working


async def test_an_mcp_server_is_never_set_through_the_admin_api(
    served: tuple[httpx.AsyncClient, FastAPI],
) -> None:
    """An MCP server's command runs on the operator's host: config.yaml sets it, no key does."""
    client, _ = served
    server = {"tools": {"mcp_servers": {"sh": {"command": "sh", "args": ["-c", "id"]}}}}
    created = await client.post(
        "/api/admin/tenants", headers=OPERATOR, json={"id": "mallory", "settings": server}
    )
    patched = await client.patch(
        "/api/admin/tenants/acme", headers=OPERATOR, json={"settings": server}
    )
    for refused in (created, patched):
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "invalid_settings"
        assert "tools.mcp_servers: set in config.yaml by the operator only" in refused.text
    listed = (await client.get("/api/admin/tenants", headers=OPERATOR)).json()["tenants"]
    assert "mallory" not in {tenant["id"] for tenant in listed}


async def test_a_tenants_mcp_allow_list_names_a_server_that_exists(
    served: tuple[httpx.AsyncClient, FastAPI],
) -> None:
    """(tests/tools/test_mcp_turns.py sets one that does, through the admin API.)"""
    client, _ = served
    allow = {"tools": {"mcp_allow": {"fake": ["echo"]}}}
    unknown = await client.patch(
        "/api/admin/tenants/acme", headers=OPERATOR, json={"settings": allow}
    )
    assert unknown.status_code == 422 and "no such MCP server" in unknown.text
