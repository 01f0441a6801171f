"""Tenant isolation (docs/operations.md, reliability A), over HTTP against the served app in keys
mode.

Two tenants, acme and globex, each get sessions, turns (one with a tool call), memory (written
by hand and by the summarizer), keys and usage. Then each probes the other with its own chat and
admin keys: another tenant's id answers exactly like an id that does not exist, no list shows
another tenant's rows, no model request carries another tenant's text, and the probed tenant's
data reads back unchanged. Leaks are collected rather than raised at the first, so one run
reports them all.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from backend.settings import Settings
from tests.api.test_auth import ADMIN_KEY
from tests.conftest import serve
from tests.fakes.summarizer import EchoSummarizer
from tests.isolation.conftest import (
    SHARED_CHAT,
    Audit,
    Tenant,
    ask_facade,
    isolation_settings,
    markers,
    open_tenant,
    owned_ids,
    set_up,
    snapshot,
)
from tests.prompt_text import prompt_text

PATH_PARAMETER = re.compile(r"\{[^}]+\}")
HTTP_METHODS = {"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE"}


# ---- the probe tables: every route of the app is in exactly one ------------------------------


@dataclass(frozen=True)
class IdProbe:
    """A route taking an id of `kind`, called with another tenant's id and with random ids."""

    kind: str  # session | memory_entry | tenant | api_key | turn | proposal | operation
    body: dict[str, Any] | None = None
    params: dict[str, str] | None = None


ID_PROBES: dict[tuple[str, str], IdProbe] = {
    ("GET", "/api/chat/sessions/{session_id}"): IdProbe("session"),
    ("PATCH", "/api/chat/sessions/{session_id}"): IdProbe("session", {"title": "taken over"}),
    ("DELETE", "/api/chat/sessions/{session_id}"): IdProbe("session"),
    ("PUT", "/api/chat/sessions/{session_id}/summary"): IdProbe(
        "session", {"summary": "taken over"}
    ),
    ("GET", "/api/chat/sessions/{session_id}/messages"): IdProbe("session"),
    ("GET", "/api/chat/sessions/{session_id}/tool-conversations"): IdProbe("session"),
    ("POST", "/api/chat/sessions/{session_id}/cancel"): IdProbe("session"),
    ("GET", "/api/chat/turns/{turn_id}/events"): IdProbe("turn"),
    ("POST", "/api/chat/turns/{turn_id}/approvals"): IdProbe(
        "turn", {"tool_call_id": "call_1", "approved": True}
    ),
    ("DELETE", "/api/memory/entries/{entry_id}"): IdProbe("memory_entry"),
    ("POST", "/api/memory/proposals/{proposal_id}/decision"): IdProbe(
        "proposal", {"approved": True}
    ),
    ("POST", "/api/memory/entries/{entry_id}/revert"): IdProbe("memory_entry"),
    ("PATCH", "/api/admin/tenants/{tenant_id}"): IdProbe(
        "tenant", {"name": "taken over", "disabled": True}
    ),
    ("POST", "/api/admin/tenants/{tenant_id}/keys"): IdProbe(
        "tenant", {"scope": "admin", "label": "taken over"}
    ),
    ("GET", "/api/admin/tenants/{tenant_id}/keys"): IdProbe("tenant"),
    ("GET", "/api/admin/tenants/{tenant_id}/links"): IdProbe("tenant"),
    ("DELETE", "/api/admin/tenants/{tenant_id}/links"): IdProbe(
        "tenant", params={"user": "someone"}
    ),
    ("DELETE", "/api/admin/keys/{key_id}"): IdProbe("api_key"),
    ("GET", "/api/admin/tenants/{tenant_id}/settings"): IdProbe("tenant"),
    ("PATCH", "/api/admin/tenants/{tenant_id}/settings"): IdProbe(
        "tenant", {"values": {"persona.name": "taken over"}}
    ),
    ("GET", "/api/admin/tenants/{tenant_id}/memory"): IdProbe("tenant"),
    ("POST", "/api/admin/tenants/{tenant_id}/operations"): IdProbe("tenant", {"kind": "export"}),
    # the bot is named like the tenant: an unknown tenant's and another tenant's answer alike
    ("POST", "/api/admin/tenants/{tenant_id}/bots/{bot}/restart"): IdProbe("tenant"),
    ("GET", "/api/admin/operations/{operation_id}"): IdProbe("operation"),
    ("GET", "/api/admin/operations/{operation_id}/result"): IdProbe("operation"),
    # Webhooks carry no API key; two tenants' bots are probed in test_channel_isolation.py.
    ("POST", "/channels/{tenant_id}/{bot_name}"): IdProbe(
        "tenant", {"update_id": 1, "message": {"message_id": 1, "text": "taken over"}}
    ),
    # WeCom's URL verification: a GET of the same address.
    ("GET", "/channels/{tenant_id}/{bot_name}"): IdProbe(
        "tenant", params={"msg_signature": "0" * 40, "timestamp": "1", "nonce": "1", "echostr": "x"}
    ),
}

# Lists and reads without an id: the query strings to try, given the probed tenant's id.
LIST_PROBES: dict[str, Callable[[str], list[dict[str, str]]]] = {
    "/api/health": lambda _: [{}],
    "/api/chat/sessions": lambda victim: [{"limit": "200"}, {"q": f"{victim}-title"}],
    "/api/memory": lambda _: [{}],
    "/api/memory/entries": lambda victim: [{}, {"q": f"{victim}-launch-code"}],
    "/api/admin/tenants": lambda _: [{}],
    "/api/usage": lambda _: [{}],
    "/api/admin/usage": lambda _: [{}],
    "/metrics": lambda _: [{}],
    "/v1/models": lambda _: [{}],
    "/api/people/links": lambda victim: [{"user": f"{victim}-user"}],
    "/api/memory/proposals": lambda victim: [{"user": f"{victim}-user"}],
    "/api/admin/audit": lambda victim: [{}, {"tenant_id": victim}],
    "/api/admin/usage.csv": lambda _: [{}],
    "/api/admin/memory-health": lambda _: [{}],
    "/api/admin/operations": lambda victim: [{}, {"tenant_id": victim}],
}

# Writes without an id in the path, each probed by `probe_writes` (the people routes, with
# their codes, by test_link_isolation.py).
WRITE_PROBES = {
    ("POST", "/api/people/link-codes"),
    ("POST", "/api/people/links"),
    ("DELETE", "/api/people/links"),
    ("POST", "/api/chat/sessions"),
    ("POST", "/api/chat/send"),
    ("PUT", "/api/memory"),
    ("POST", "/api/memory/entries"),
    ("POST", "/api/admin/tenants"),
    ("POST", "/v1/chat/completions"),
}


def app_routes(app: FastAPI) -> list[tuple[str, str, bool]]:
    """(method, path, takes an id) of every operation in the app's OpenAPI schema."""
    return sorted(
        (method.upper(), path, PATH_PARAMETER.search(path) is not None)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if method.upper() in HTTP_METHODS
    )


def random_ids(kind: str) -> list[str]:
    """Ids of `kind` that exist nowhere, in every shape a store uses."""
    return {
        "session": [str(uuid.uuid4())],
        # the file store's ids are 12 hex digits, the database store's are row numbers
        "memory_entry": [secrets.token_hex(6), str(10**12 + secrets.randbelow(10**12))],
        "tenant": [f"tenant-{secrets.token_hex(4)}"],
        "api_key": [f"key_{secrets.token_hex(8)}"],
        "turn": [f"turn_{secrets.token_hex(8)}"],
        "proposal": [str(10**9 + secrets.randbelow(10**9))],
        "operation": [secrets.token_hex(8)],
    }[kind]


# ---- the probes -------------------------------------------------------------------------------


def answer(response: httpx.Response, used_id: str) -> tuple[int, str]:
    """Status and body, with the id the caller sent (echoed in messages) blanked out."""
    return response.status_code, response.text.replace(used_id, "<id>")


async def probe_ids(
    audit: Audit, app: FastAPI, attacker: Tenant, victim: Tenant, ids: dict[str, list[str]]
) -> None:
    for method, path, takes_id in app_routes(app):
        if not takes_id:
            continue
        probe = ID_PROBES[(method, path)]
        for key_name, headers in (("chat", attacker.chat), ("admin", attacker.admin)):
            where = f"{method} {path} with {attacker.id}'s {key_name} key"
            unknown = set()
            for fake_id in random_ids(probe.kind):
                url = PATH_PARAMETER.sub(fake_id, path)
                response = await audit.request(
                    method, url, headers, json=probe.body, params=probe.params
                )
                unknown.add(answer(response, fake_id))
            if len(unknown) != 1 or next(iter(unknown))[0] not in (403, 404):
                audit.leaks.append(f"{where}: unknown ids answer {sorted(unknown)}")
                continue
            expected = next(iter(unknown))
            for victim_id in ids[probe.kind]:
                url = PATH_PARAMETER.sub(victim_id, path)
                response = await audit.request(
                    method, url, headers, json=probe.body, params=probe.params
                )
                if answer(response, victim_id) != expected:
                    audit.leaks.append(
                        f"{where} and {victim.id}'s {probe.kind} {victim_id}: "
                        f"{response.status_code} {response.text[:300]} (unknown id: {expected})"
                    )


async def probe_lists(
    audit: Audit, attacker: Tenant, victim: Tenant, victim_markers: set[str]
) -> None:
    for path, queries in LIST_PROBES.items():
        for params in queries(victim.id):
            for key_name, headers in (("chat", attacker.chat), ("admin", attacker.admin)):
                response = await audit.request("GET", path, headers, params=params)
                where = f"GET {path} {params} with {attacker.id}'s {key_name} key"
                audit.check_clean(where, response.text, victim_markers)
    own = [  # the attacker's own ids, with cursors and filters that could reach further
        (f"/api/chat/sessions/{attacker.session_id}/messages", attacker.chat),
        (f"/api/chat/sessions/{attacker.session_id}/tool-conversations", attacker.chat),
        (f"/api/admin/tenants/{attacker.id}/keys", attacker.admin),
    ]
    for path, headers in own:
        params = (
            {"include_archived": "true", "before_id": str(10**12)} if "messages" in path else {}
        )
        response = await audit.request("GET", path, headers, params=params)
        if response.status_code != 200:
            audit.leaks.append(f"GET {path} by {attacker.id} itself: {response.text[:300]}")
        audit.check_clean(f"GET {path} with {attacker.id}'s key", response.text, victim_markers)


async def probe_writes(
    audit: Audit,
    provider: ScriptedProvider,
    attacker: Tenant,
    victim: Tenant,
    ids: dict[str, list[str]],
    victim_markers: set[str],
) -> None:
    """Writes that name no id in the path, but may name the victim's ids or names in the body
    or headers; every model request they cause must be free of the victim's text."""
    chat = attacker.chat
    first_request = len(provider.requests)

    created = await audit.request("POST", "/api/chat/sessions", chat, json={})
    audit.check_clean(f"POST /api/chat/sessions by {attacker.id}", created.text, victim_markers)

    for is_streaming in (False, True):
        (fake_id,) = random_ids("session")
        body = {"session_id": fake_id, "message": f"{attacker.id}-intruder", "stream": is_streaming}
        expected = answer(await audit.request("POST", "/api/chat/send", chat, json=body), fake_id)
        for session_id in ids["session"]:
            body["session_id"] = session_id
            response = await audit.request("POST", "/api/chat/send", chat, json=body)
            if response.status_code != 404 or answer(response, session_id) != expected:
                audit.leaks.append(
                    f"POST /api/chat/send (stream={is_streaming}) by {attacker.id} into "
                    f"{victim.id}'s session: {response.status_code} {response.text[:300]}"
                )

    # The attacker's own memory, rewritten: the victim's must not move.
    own = (await audit.request("GET", "/api/memory", chat)).json()["content"]
    extra = f"2026-01-03|manual|{attacker.id}-extra-fact\n"
    put = await audit.request("PUT", "/api/memory", chat, json={"content": own + extra})
    audit.check_clean(f"PUT /api/memory by {attacker.id}", put.text, victim_markers)
    # An entry added by hand, also under an end user named like the victim: it lands in the
    # attacker's memory only (the snapshot compared after the probes shows the victim's).
    for params in ({}, {"user": victim.id}):
        fact = {"content": f"{attacker.id}-added-fact"}
        added = await audit.request("POST", "/api/memory/entries", chat, json=fact, params=params)
        where = f"POST /api/memory/entries {params} by {attacker.id}"
        if added.status_code != 201:
            audit.leaks.append(f"{where}: {added.status_code} {added.text[:300]}")
        audit.check_clean(where, added.text, victim_markers)

    for headers in (chat, attacker.admin):
        (fake_id,) = random_ids("tenant")
        unknown = await audit.request("POST", "/api/admin/tenants", headers, json={"id": fake_id})
        taken = await audit.request("POST", "/api/admin/tenants", headers, json={"id": victim.id})
        if answer(taken, victim.id) != answer(unknown, fake_id) or taken.status_code != 403:
            audit.leaks.append(
                f"POST /api/admin/tenants by {attacker.id} naming {victim.id}: "
                f"{taken.status_code} {taken.text[:300]}"
            )

    # /v1 names sessions by the caller's own chat id: the shared one, and the victim's own
    # session ids used as names, all stay within the attacker's tenant.
    for name in (SHARED_CHAT, *ids["session"]):
        response = await audit.request(
            "POST",
            "/v1/chat/completions",
            chat | {"X-Tally-Session": name},
            json={"model": "any-model", "messages": [{"role": "user", "content": "hello"}]},
        )
        session_id = response.headers.get("X-Tally-Session-Id")
        where = f"POST /v1/chat/completions by {attacker.id} with X-Tally-Session {name}"
        if response.status_code != 200 or session_id in ids["session"]:
            audit.leaks.append(f"{where}: {response.status_code} session {session_id}")
        if name == SHARED_CHAT and session_id != attacker.facade_session_id:
            audit.leaks.append(f"{where}: not {attacker.id}'s own session ({session_id})")
        audit.check_clean(where, response.text, victim_markers)

    # The victim's Idempotency-Key replays nothing of the victim's.
    provider.push(f"{attacker.id}-fresh-reply")
    replayed = await audit.request(
        "POST",
        "/api/chat/send",
        chat | {"Idempotency-Key": f"{victim.id}-only-key"},
        json={"session_id": attacker.session_id, "message": f"{attacker.id}-retry"},
    )
    if replayed.status_code != 200 or replayed.json()["reply"] != f"{attacker.id}-fresh-reply":
        audit.leaks.append(f"{victim.id}'s Idempotency-Key with {attacker.id}: {replayed.text}")

    # The model's memory_search tool, asked for words of the victim's fact (and the
    # attacker's own: both facts share them), finds only the attacker's.
    query: dict[str, object] = {"query": "launch-code 1234"}
    provider.push(
        ScriptedToolCalls([ToolCall(id="probe-search", name="memory_search", arguments=query)]),
        f"{attacker.id}-searched",
    )
    searched = await audit.request(
        "POST",
        "/api/chat/send",
        chat,
        json={"session_id": attacker.session_id, "message": f"{attacker.id}-search"},
    )
    calls = searched.json().get("tool_calls") or [{}]
    if f"{attacker.id}-launch-code" not in str(calls[0].get("result")):
        audit.leaks.append(f"memory_search by {attacker.id} misses its own fact: {calls}")
    audit.check_clean(f"memory_search by {attacker.id}", searched.text, victim_markers)

    # Memory's search of archived turns, asked for the words of the victim's messages (the
    # attacker said the same words, with its own id): only the attacker's turns come back.
    provider.push(f"{attacker.id}-archive-reply")
    archive_probe = await audit.request(
        "POST",
        "/api/chat/send",
        chat,
        json={"session_id": attacker.session_id, "message": "message 0 1 2 reply launch code"},
    )
    if archive_probe.status_code != 200:
        audit.leaks.append(f"the archive probe by {attacker.id} failed: {archive_probe.text}")
    elif f"{attacker.id}-message-0" not in prompt_text(provider.requests[-1]):
        audit.leaks.append(f"{attacker.id}'s own archived turns were not searched")

    for request in provider.requests[first_request:]:
        audit.check_clean(f"a model request of {attacker.id}", repr(request), victim_markers)


def compare(audit: Audit, before: dict[str, Any], after: dict[str, Any], what: str) -> None:
    for name in sorted(before.keys() | after.keys()):
        if before.get(name) != after.get(name):
            audit.leaks.append(f"{what}: {name} changed: {before.get(name)} -> {after.get(name)}")


def check_memory_files(
    audit: Audit, settings: Settings, tmp_path: Path, tenants: Iterable[Tenant]
) -> None:
    """Each tenant's facts sit in its own MEMORY.md and nowhere else; the default tenant's file
    (the top-level path) holds none of theirs."""
    tenants = list(tenants)
    memory_dir = Path(settings.data_dir) / "memory"
    for tenant in tenants:
        own = memory_dir / tenant.id / "tenant.md"
        text = own.read_text(encoding="utf-8") if own.exists() else ""
        if tenant.secret not in text or f"user said: {tenant.id}-message-0" not in text:
            audit.leaks.append(
                f"{tenant.id}'s facts are not in its own {own.relative_to(tmp_path)}"
            )
    files = [Path(settings.memory.path), *memory_dir.rglob("*.md")]
    for file in files:
        if not file.exists():
            continue
        owner = file.parent.name if file.parent.parent == memory_dir else "default"
        text = file.read_text(encoding="utf-8")
        for tenant in tenants:
            if tenant.id != owner and tenant.id in text:
                audit.leaks.append(f"{file.relative_to(tmp_path)} holds {tenant.id}'s memory")


async def probe_both_ways(
    client: httpx.AsyncClient,
    app: FastAPI,
    provider: ScriptedProvider,
    summarizer: EchoSummarizer,
    audit: Audit,
    tenants: tuple[Tenant, Tenant],
) -> None:
    """globex probes acme, then acme probes globex; the probed tenant's data must read back
    unchanged, and no summary written meanwhile may carry its text."""
    acme, globex = tenants
    for attacker, victim in ((globex, acme), (acme, globex)):
        before = await snapshot(client, app, victim)
        victim_markers = markers(before, victim)
        ids = owned_ids(before, victim)
        first_summary = len(summarizer.requests)
        await probe_ids(audit, app, attacker, victim, ids)
        await probe_lists(audit, attacker, victim, victim_markers)
        await probe_writes(audit, provider, attacker, victim, ids, victim_markers)
        after = await snapshot(client, app, victim)
        compare(audit, before, after, f"{victim.id} after {attacker.id}'s probes")
        for request in summarizer.requests[first_summary:]:
            audit.check_clean("a summarizer request", repr(request), victim_markers)
        if audit.leaks:
            return  # the other direction would start from damaged data


# ---- the tests --------------------------------------------------------------------------------


def test_every_route_is_in_a_probe_table(sqlite_url: str, tmp_path: Path) -> None:
    """A new route fails here until the isolation suite probes it."""
    routes = app_routes(create_app(isolation_settings(sqlite_url, tmp_path)))
    with_id = {(method, path) for method, path, takes_id in routes if takes_id}
    without_id = {(method, path) for method, path, takes_id in routes if not takes_id}
    listed = {("GET", path) for path in LIST_PROBES}
    assert with_id == set(ID_PROBES), "every route with a path parameter needs an IdProbe"
    assert without_id == listed | WRITE_PROBES, "every other route needs a list or write probe"


@pytest.mark.parametrize("store", ["file", "database"])
async def test_no_tenant_reaches_another_tenants_data(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(replies=["(unscripted)"])
    summarizer = EchoSummarizer()
    settings = isolation_settings(database_url, tmp_path, store=store)
    app = create_app(settings, provider=provider, summarizer_provider=summarizer)
    async with serve(app) as client:
        audit = Audit(client)
        tenants = await set_up(client, app, provider, summarizer, audit)
        if store == "file":
            check_memory_files(audit, settings, tmp_path, tenants)
        if not audit.leaks:  # the probes need intact data to mean anything
            await probe_both_ways(client, app, provider, summarizer, audit, tenants)
    print(f"isolation: {audit.probes} cross-tenant probes, {len(audit.leaks)} leaks")
    assert audit.leaks == []


@pytest.mark.parametrize("store", ["file", "database"])
async def test_memory_scope_user_keeps_end_users_apart(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(replies=["ok"])
    settings = isolation_settings(database_url, tmp_path, store=store, scope="user")
    app = create_app(settings, provider=provider, summarizer_provider=EchoSummarizer())
    marks = {"alice": ("alice-secret", "alice-message"), "bob": ("bob-secret",)}
    async with serve(app) as client:
        acme = await open_tenant(client, "acme")

        async def turn(user: str, message: str) -> list[str]:
            """One /v1 turn of `user`; the model requests it made, as text."""
            first = len(provider.requests)
            response = await ask_facade(client, acme.chat, message, user=user)
            assert response.status_code == 200, response.text
            await app.state.services.runtimes.wait_idle()
            return [repr(request) for request in provider.requests[first:]]

        put = await client.put(
            "/api/memory",
            headers=acme.chat,
            params={"user": "alice"},
            json={"content": "2026-01-02|manual|alice-secret: allergic to peanuts\n"},
        )
        assert put.status_code == 200, put.text
        for i in range(3):  # the window of 4 overflows: the summarizer writes alice's memory
            await turn("alice", f"alice-message-{i}")
        provider.push(
            ScriptedToolCalls(
                [ToolCall(id="w", name="memory_write", arguments={"fact": "bob-secret: oboe"})]
            ),
            "noted",
            ScriptedToolCalls(
                [ToolCall(id="s", name="memory_search", arguments={"query": "allergic peanuts"})]
            ),
            "nothing",
        )
        bob = await turn("bob", "bob-message-0: I play the oboe")
        bob += await turn("bob", "bob-message-1: any allergies on file?")
        bob += await turn("bob", "message 0 1 2: what did anyone say before?")  # the archive
        alice = await turn("alice", "hello again")
        alice_system = prompt_text(provider.requests[-1])
        memories = {
            user: (await client.get("/api/memory", headers=acme.chat, params={"user": user})).text
            for user in ("alice", "bob", "")
        }

    # What each user stored reaches that user: the checks below are not vacuous.
    assert "alice-secret" in alice_system and "user said: alice-message-0" in alice_system
    assert "bob-secret" in memories["bob"] and "alice-secret" in memories["alice"]
    views = [
        ("bob's model requests", "\n".join(bob), "alice"),
        ("alice's model requests", "\n".join(alice), "bob"),
        ("bob's memory", memories["bob"], "alice"),
        ("alice's memory", memories["alice"], "bob"),
        ("the tenant-wide memory", memories[""], "alice"),
        ("the tenant-wide memory", memories[""], "bob"),
    ]
    if store == "file":
        for user, other in (("alice", "bob"), ("bob", "alice")):
            name = f"user-{hashlib.sha256(user.encode()).hexdigest()}.md"
            text = (Path(settings.data_dir) / "memory" / "acme" / name).read_text("utf-8")
            assert f"{user}-secret" in text
            views.append((f"{user}'s MEMORY.md", text, other))
    leaks = [f"{view} shows {m}" for view, text, other in views for m in marks[other] if m in text]
    assert leaks == []
