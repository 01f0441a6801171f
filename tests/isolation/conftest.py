"""The world the isolation suite probes: two tenants in keys mode, each with sessions, turns
(one with a tool call), memory written by hand and by the summarizer, keys and usage; and the
`Audit` that counts cross-tenant requests and collects leaks.

Every text a tenant stores contains its id, so its id marks its data wherever it turns up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from backend.settings import Settings
from tests.api.test_auth import ADMIN_KEY, bearer
from tests.conftest import make_settings
from tests.fakes.summarizer import EchoSummarizer
from tests.sse import read_events

OPERATOR = bearer(ADMIN_KEY)
SHARED_CHAT = "chat-42"  # one external chat id (X-Tally-Session) used by both tenants
SHARED_IDEMPOTENCY_KEY = "client-retry-1"  # one Idempotency-Key used by both tenants


@dataclass
class Tenant:
    """One tenant; every text it stores contains its id, so its id marks its data."""

    id: str
    chat_key: str = ""
    admin_key: str = ""
    session_id: str = ""
    facade_session_id: str = ""
    operation_id: str = ""  # an export of its memory, through the console's operations

    @property
    def chat(self) -> dict[str, str]:
        return bearer(self.chat_key)

    @property
    def admin(self) -> dict[str, str]:
        return bearer(self.admin_key)

    @property
    def secret(self) -> str:
        return f"the {self.id}-launch-code is {self.id}-1234"


@dataclass
class Audit:
    """Counts requests made with another tenant's credentials and collects what leaked."""

    client: httpx.AsyncClient
    probes: int = 0
    leaks: list[str] = field(default_factory=list)

    async def request(
        self, method: str, url: str, headers: dict[str, str], **kwargs: Any
    ) -> httpx.Response:
        self.probes += 1
        return await self.client.request(method, url, headers=headers, **kwargs)

    def check_clean(self, what: str, text: str, markers: Iterable[str]) -> None:
        folded = text.casefold()
        found = sorted({m for m in markers if m.casefold() in folded})
        if found:
            self.leaks.append(f"{what} shows the other tenant's {found}")


def isolation_settings(database_url: str, tmp_path: Path, **memory: Any) -> Settings:
    return make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        providers={"fake": {"kind": "scripted"}},
        model={"provider": "fake", "name": "base-model"},
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2, **memory},
    )


async def open_tenant(client: httpx.AsyncClient, tenant_id: str) -> Tenant:
    """A tenant with its own persona and model, a chat key and an admin key."""
    created = await client.post(
        "/api/admin/tenants",
        headers=OPERATOR,
        json={
            "id": tenant_id,
            "name": tenant_id.title(),
            "settings": {
                "persona": {"name": f"{tenant_id.title()} Persona"},
                "model": {"provider": "fake", "name": f"{tenant_id}-model"},
            },
        },
    )
    assert created.status_code == 201, created.text
    tenant = Tenant(tenant_id)
    for scope in ("chat", "admin"):
        key = await client.post(
            f"/api/admin/tenants/{tenant_id}/keys",
            headers=OPERATOR,
            json={"scope": scope, "label": f"{tenant_id}-{scope}"},
        )
        assert key.status_code == 201, key.text
        setattr(tenant, f"{scope}_key", key.json()["key"])
    return tenant


async def send(
    client: httpx.AsyncClient, tenant: Tenant, message: str, **headers: str
) -> httpx.Response:
    return await client.post(
        "/api/chat/send",
        headers=tenant.chat | headers,
        json={"session_id": tenant.session_id, "message": message},
    )


async def ask_facade(
    client: httpx.AsyncClient, headers: dict[str, str], message: str, **fields: str
) -> httpx.Response:
    return await client.post(
        "/v1/chat/completions",
        headers=headers,
        json={"model": "any-model", "messages": [{"role": "user", "content": message}], **fields},
    )


async def fill(
    client: httpx.AsyncClient,
    provider: ScriptedProvider,
    tenant: Tenant,
    audit: Audit,
    earlier: Tenant | None = None,
) -> None:
    """Memory by hand, a titled session of three turns (the first with a `now` tool call, so
    the window of 4 overflows), and a turn through /v1 in the shared chat.

    After an `earlier` tenant, the turn reusing its Idempotency-Key and the /v1 turn in its
    chat id are cross-tenant probes: what goes wrong there is a leak, not a set-up failure."""

    def expect(is_ok: bool, problem: str, *, is_probe: bool = False) -> None:
        if earlier is None or not is_probe:
            assert is_ok, problem
        elif not is_ok:
            audit.leaks.append(f"{tenant.id} after {earlier.id}: {problem}")

    chat = tenant.chat
    first_request = len(provider.requests)
    put = await client.put(
        "/api/memory", headers=chat, json={"content": f"2026-01-02|manual|{tenant.secret}\n"}
    )
    assert put.status_code == 200, put.text
    created = await client.post(
        "/api/chat/sessions", headers=chat, json={"title": f"{tenant.id}-title"}
    )
    tenant.session_id = created.json()["id"]
    provider.push(
        ScriptedToolCalls([ToolCall(id=f"{tenant.id}-call", name="now", arguments={})]),
        f"{tenant.id}-reply-0",
        f"{tenant.id}-reply-1",
        f"{tenant.id}-reply-2",
    )
    idempotency_keys = [SHARED_IDEMPOTENCY_KEY, f"{tenant.id}-only-key", None]
    for i, idempotency_key in enumerate(idempotency_keys):
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        is_probe = idempotency_key == SHARED_IDEMPOTENCY_KEY and earlier is not None
        audit.probes += is_probe
        reply = await send(client, tenant, f"{tenant.id}-message-{i}", **headers)
        is_own = reply.status_code == 200 and reply.json()["reply"] == f"{tenant.id}-reply-{i}"
        expect(is_own, f"turn {i} answered {reply.text[:300]}", is_probe=is_probe)
        if not is_own:
            return  # the scripted replies are out of step now
    provider.push(f"{tenant.id}-facade-reply")
    audit.probes += earlier is not None
    facade = await ask_facade(
        client, chat | {"X-Tally-Session": SHARED_CHAT}, f"{tenant.id}-facade-message"
    )
    tenant.facade_session_id = facade.headers.get("X-Tally-Session-Id", "")
    is_own = (
        facade.status_code == 200
        and facade.json()["choices"][0]["message"]["content"] == f"{tenant.id}-facade-reply"
        and tenant.facade_session_id != (earlier.facade_session_id if earlier else None)
    )
    expect(is_own, f"/v1 in chat {SHARED_CHAT}: {facade.text[:300]}", is_probe=True)
    await stream_a_turn(client, provider, tenant)
    if earlier is not None:
        for request in provider.requests[first_request:]:
            audit.check_clean(f"a model request of {tenant.id}", repr(request), {earlier.id})


async def stream_a_turn(
    client: httpx.AsyncClient, provider: ScriptedProvider, tenant: Tenant
) -> None:
    """A streamed turn in a session of its own: its events stay readable for a reconnect
    (`GET /api/chat/turns/{turn_id}/events`), a route the probes try with the other's key."""
    created = await client.post("/api/chat/sessions", headers=tenant.chat, json={})
    provider.push(f"{tenant.id}-streamed-reply")
    body = {"session_id": created.json()["id"], "message": f"{tenant.id}-streamed", "stream": True}
    async with client.stream("POST", "/api/chat/send", headers=tenant.chat, json=body) as sent:
        events = [(name, data) async for name, data in read_events(sent)]
    assert events[-1][0] == "turn.completed", events
    resumed = await client.get(
        f"/api/chat/turns/{events[-1][1]['turn_id']}/events", headers=tenant.chat
    )
    assert f"{tenant.id}-streamed-reply" in resumed.text, resumed.text


async def snapshot(client: httpx.AsyncClient, app: FastAPI, tenant: Tenant) -> dict[str, Any]:
    """Everything the tenant can read of itself, each read as (status, body), with its own
    keys (so a revoked or disabled key shows up as a change)."""
    await app.state.services.runtimes.wait_idle()

    async def read(url: str, headers: dict[str, str], **params: str) -> tuple[int, Any]:
        response = await client.get(url, headers=headers, params=params)
        return response.status_code, response.json()

    state: dict[str, Any] = {
        "sessions": await read("/api/chat/sessions", tenant.chat, limit="200"),
        "memory": await read("/api/memory", tenant.chat),
        "usage": await read("/api/usage", tenant.chat),
        "tenant": await read("/api/admin/tenants", tenant.admin),
    }
    status, keys = await read(f"/api/admin/tenants/{tenant.id}/keys", tenant.admin)
    for key in keys.get("keys", []):
        key.pop("last_used_at")  # the probed tenant's own reads touch it
    state["keys"] = (status, keys)
    for session in state["sessions"][1].get("sessions", []):
        base = f"/api/chat/sessions/{session['id']}"
        state[f"session {session['id']}"] = await read(base, tenant.chat)
        state[f"messages of {session['id']}"] = await read(
            f"{base}/messages", tenant.chat, include_archived="true"
        )
        state[f"tool conversations of {session['id']}"] = await read(
            f"{base}/tool-conversations", tenant.chat
        )
    return state


def owned_ids(state: dict[str, Any], tenant: Tenant) -> dict[str, list[str]]:
    return {
        "session": [s["id"] for s in state["sessions"][1]["sessions"]],
        "memory_entry": [e["id"] for e in state["memory"][1]["entries"]],
        "tenant": [tenant.id],
        "turn": [
            message["turn_id"]
            for name, (_, read) in state.items()
            if name.startswith("messages of")
            for message in read["messages"]
        ],
        "api_key": [k["id"] for k in state["keys"][1]["keys"]],
        "proposal": [],  # none where memory is the tenant's: test_link_isolation.py has some
        "operation": [tenant.operation_id],
    }


def markers(state: dict[str, Any], tenant: Tenant) -> set[str]:
    """Strings that are the tenant's alone: its id (inside all its texts), session and key ids,
    key prefixes, and entry ids long enough not to occur by chance."""
    ids = owned_ids(state, tenant)
    prefixes = [k["prefix"] for k in state["keys"][1]["keys"]]
    entry_ids = [i for i in ids["memory_entry"] if len(i) >= 8]
    return {tenant.id, *ids["session"], *ids["api_key"], *prefixes, *entry_ids}


async def set_up(
    client: httpx.AsyncClient,
    app: FastAPI,
    provider: ScriptedProvider,
    summarizer: EchoSummarizer,
    audit: Audit,
) -> tuple[Tenant, Tenant]:
    """acme, then globex, each with its data; checks that the data the probes are meant to
    miss is really there, and that each summarizer request covered one tenant."""
    acme = await open_tenant(client, "acme")
    globex = await open_tenant(client, "globex")
    await fill(client, provider, acme, audit)
    await fill(client, provider, globex, audit, earlier=acme)
    await app.state.services.runtimes.wait_idle()
    for tenant in (acme, globex):
        started = await client.post(
            f"/api/admin/tenants/{tenant.id}/operations",
            headers=tenant.admin,
            json={"kind": "export"},
        )
        assert started.status_code == 202, started.text
        tenant.operation_id = started.json()["id"]
    await app.state.operations.wait_idle()
    for tenant in (acme, globex):
        done = await client.get(f"/api/admin/operations/{tenant.operation_id}", headers=OPERATOR)
        assert done.json()["state"] == "done", done.text
    if audit.leaks:
        return acme, globex
    for tenant in (acme, globex):
        state = await snapshot(client, app, tenant)
        entries = state["memory"][1]["entries"]
        assert {e["source"] for e in entries} == {"manual", "auto-overflow"}, entries
        assert state[f"tool conversations of {tenant.session_id}"][1]["tool_conversations"]
        assert state[f"session {tenant.session_id}"][1]["summary"]
        for entry in entries:
            if entry["provenance"] and entry["provenance"]["session_id"] != tenant.session_id:
                audit.leaks.append(f"{tenant.id}'s memory holds {entry} of another session")
    for request in summarizer.requests:
        owners = [t.id for t in (acme, globex) if t.id in repr(request)]
        if len(owners) != 1:
            audit.leaks.append(f"one summarizer request covers {owners}")
    return acme, globex
