"""The operator console's routes (issue 18): a tenant's settings key by key with their origin,
edited one key at a time and used by the next turn; usage with its estimated cost, also as CSV;
memory health per tenant; long operations (export, re-summarize) followed to their end; a bot
restart of a bot that does not exist. All under `auth.mode: keys` with the operator's key."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.domain.events import Finished, ProviderEvent, TextDelta, UsageReported
from backend.domain.messages import Usage
from backend.domain.requests import ChatRequest
from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider
from tests.api.test_auth import ADMIN_KEY, bearer
from tests.conftest import make_settings, serve

OPERATOR = bearer(ADMIN_KEY)
# The contract's keys, in its order, and the CSV's header row.
CONSOLE_KEYS = (
    "persona.name persona.language persona.max_history_messages model.provider model.name "
    "memory.scope memory.overflow_batch quotas.requests_per_minute quotas.tokens_per_day"
).split()
CSV_HEADER = (
    "tenant_id,day,turns,prompt_tokens,completion_tokens,cached_tokens,cache_write_tokens,"
    "summarizer_calls,summarizer_tokens,estimated_cost"
).split(",")
# An injected provider answers as the demo model's name when no model is configured.
PRICING = {
    "currency": "EUR",
    "models": {"tally-demo": {"input": 2.0, "cached_input": 0.5, "output": 8.0}},
}
TURN_USAGE = Usage(prompt_tokens=1000, completion_tokens=20, cached_tokens=400)
TURN_MICROS = 600 * 2.0 + 400 * 0.5 + 20 * 8.0  # fresh input, cached input, output
SUMMARY_USAGE = Usage(prompt_tokens=300, completion_tokens=30)
SUMMARY_MICROS = 300 * 2.0 + 30 * 8.0
SUMMARY = "## Memory\n- The user likes green tea.\n\n## Summary\nThey talked about tea."
# A window of 4 messages: the third turn in a session evicts 2 of them to the summarizer.
OVERFLOWING = {"persona": {"max_history_messages": 4}, "memory": {"overflow_batch": 2}}


@dataclass
class FixedSummarizer:
    """The summarizer model: SUMMARY with SUMMARY_USAGE, or a 503 while `is_broken`."""

    is_broken: bool = False
    name: str = "summarizer"

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        if self.is_broken:
            raise ProviderUnavailable(self.name, "HTTP 503 (scripted)")
        yield TextDelta(SUMMARY)
        yield UsageReported(replace(SUMMARY_USAGE))
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


@asynccontextmanager
async def console(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: ScriptedProvider | None = None,
    summarizer: FixedSummarizer | None = None,
    **sections: Any,
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"}, **sections)
    app = create_app(
        settings,
        provider=provider or ScriptedProvider(replies=["Noted."]),
        summarizer_provider=summarizer or FixedSummarizer(),
    )
    async with serve(app) as client:
        yield client, app


def ok(response: httpx.Response) -> Any:
    assert response.is_success, response.text
    return response.json()


async def tenant_key(
    client: httpx.AsyncClient,
    tenant: str,
    settings: dict[str, Any] | None = None,
    scope: str = "chat",
) -> str:
    """Create `tenant` (the default tenant exists already); a new key's secret."""
    made = await client.post(
        "/api/admin/tenants", headers=OPERATOR, json={"id": tenant, "settings": settings or {}}
    )
    assert made.status_code in (201, 409), made.text
    key = await client.post(
        f"/api/admin/tenants/{tenant}/keys", headers=OPERATOR, json={"scope": scope}
    )
    secret: str = ok(key)["key"]
    return secret


async def chat(client: httpx.AsyncClient, app: FastAPI, key: str, turns: int) -> None:
    """`turns` turns in one session, each followed by its summaries (if any)."""
    session_id = ok(await client.post("/api/chat/sessions", headers=bearer(key), json={}))["id"]
    for n in range(turns):
        body = {"session_id": session_id, "message": f"question {n}"}
        ok(await client.post("/api/chat/send", headers=bearer(key), json=body))
        await app.state.services.runtimes.wait_idle()


async def memory_of(client: httpx.AsyncClient, key: str, user: str = "") -> list[Any]:
    read = await client.get(
        "/api/memory", headers=bearer(key), params={"user": user} if user else {}
    )
    entries: list[Any] = ok(read)["entries"]
    return entries


async def remember(client: httpx.AsyncClient, key: str, fact: str, user: str = "") -> None:
    params = {"user": user} if user else {}
    added = await client.post(
        "/api/memory/entries", headers=bearer(key), params=params, json={"content": fact}
    )
    assert added.status_code == 201, added.text


def by_key(body: dict[str, Any]) -> dict[str, tuple[Any, str, Any]]:
    return {f["key"]: (f["value"], f["origin"], f["file_value"]) for f in body["fields"]}


async def audited(client: httpx.AsyncClient, tenant: str, action: str) -> list[dict[str, Any]]:
    """The tenant's audit entries of `action`, oldest first."""
    listing = ok(
        await client.get("/api/admin/audit", headers=OPERATOR, params={"tenant_id": tenant})
    )
    return [e for e in reversed(listing["entries"]) if e["action"] == action]


async def test_settings_show_their_origin_and_an_edit_reaches_the_next_turn(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(replies=["Noted."])
    from_file = {"acme": {"persona": {"max_history_messages": 20}}}
    async with console(
        database_url, tmp_path, monkeypatch, provider=provider, tenants=from_file
    ) as (client, _):
        chat_key = await tenant_key(client, "acme")  # config.yaml's tenants exist at start
        admin_key = await tenant_key(client, "acme", scope="admin")
        api_set = {"settings": {"quotas": {"tokens_per_day": 50_000}}}
        ok(await client.patch("/api/admin/tenants/acme", headers=OPERATOR, json=api_set))
        path = "/api/admin/tenants/acme/settings"
        first = ok(await client.get(path, headers=OPERATOR))
        values = {"persona.name": "Marvin", "persona.max_history_messages": 6}
        named = ok(await client.patch(path, headers=OPERATOR, json={"values": values}))
        ok(await client.post("/api/chat/send", headers=bearer(chat_key), json={"message": "hi"}))
        system_prompt = provider.requests[-1].system
        values = {"persona.max_history_messages": None}
        reset = ok(await client.patch(path, headers=OPERATOR, json={"values": values}))
        refusals = [
            {"persona.max_history_messages": 0},
            {"persona.max_history_messages": "x"},
            {"persona.name": "Zed", "persona.max_history_messages": 0},  # one bad: none set
            {"persona.nickname": "Zed"},
        ]
        refused = [await client.patch(path, headers=OPERATOR, json={"values": v}) for v in refusals]
        after_refusals = ok(await client.get(path, headers=OPERATOR))
        tenant_admin = [
            await client.get(path, headers=bearer(admin_key)),
            await client.patch(
                path, headers=bearer(admin_key), json={"values": {"persona.name": "Own"}}
            ),
        ]
        changes = await audited(client, "acme", "tenant.settings")

    assert [f["key"] for f in first["fields"]] == CONSOLE_KEYS
    assert by_key(first)["persona.name"] == ("Tally", "default", None)
    assert by_key(first)["persona.max_history_messages"] == (20, "file", 20)
    assert by_key(first)["quotas.tokens_per_day"] == (50_000, "api", None)
    assert by_key(named)["persona.name"] == ("Marvin", "api", None)
    assert by_key(named)["persona.max_history_messages"] == (6, "api", 20)
    assert "You are Marvin" in system_prompt  # the next turn, without a restart
    assert by_key(reset)["persona.max_history_messages"] == (20, "file", 20)
    assert by_key(reset)["persona.name"] == ("Marvin", "api", None)
    assert [r.json()["error"]["code"] for r in refused] == ["invalid_settings"] * 4
    messages = [r.json()["error"]["message"] for r in refused]
    assert all("persona.max_history_messages" in m for m in messages[:3]), messages
    assert "persona.nickname" in messages[3]
    assert after_refusals == reset  # nothing changed
    assert [r.status_code for r in tenant_admin] == [403, 403]
    # Told apart from a chat key's refusal: the console keeps such a key signed in.
    assert {r.json()["error"]["code"] for r in tenant_admin} == {"operator_only"}
    assert [c["detail"] for c in changes] == [
        {"set": ["persona.max_history_messages", "persona.name"], "reset": []},
        {"set": [], "reset": ["persona.max_history_messages"]},
    ]
    assert [r.status_code for r in refused] == [422] * 4  # as every invalid input


async def test_usage_charges_turns_and_summaries_at_the_configured_prices(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(replies=["Noted."], usage=TURN_USAGE)
    async with console(
        database_url,
        tmp_path,
        monkeypatch,
        provider=provider,
        pricing=PRICING,
        providers={"unpriced": {"kind": "scripted"}},
    ) as (client, app):
        acme = await tenant_key(client, "acme", OVERFLOWING)
        free_model = {"model": {"provider": "unpriced", "name": "no-price-model"}}
        globex = await tenant_key(client, "globex", free_model)
        await chat(client, app, acme, turns=3)
        await chat(client, app, globex, turns=2)
        usage = ok(await client.get("/api/admin/usage", headers=OPERATOR))
        exported = await client.get("/api/admin/usage.csv", headers=OPERATOR)
        refused = [
            await client.get("/api/admin/usage", headers=bearer(acme)),
            await client.get("/api/admin/usage.csv", headers=bearer(acme)),
        ]

    days = {d["tenant_id"]: d for d in usage["days"]}
    priced, unpriced = days["acme"], days["globex"]
    assert usage["currency"] == "EUR"
    assert (priced["turns"], priced["prompt_tokens"], priced["cached_tokens"]) == (3, 3000, 1200)
    calls = priced["summarizer_calls"]
    assert calls >= 1  # the third turn overflowed the window
    assert priced["summarizer_tokens"] == calls * (300 + 30)
    assert priced["estimated_cost"] == (3 * TURN_MICROS + calls * SUMMARY_MICROS) / 1_000_000
    assert priced["unpriced_calls"] == 0
    assert (unpriced["turns"], unpriced["estimated_cost"], unpriced["unpriced_calls"]) == (
        2,
        None,
        2,
    )
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("text/csv")
    disposition = exported.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="tally-usage-'), disposition
    header, *rows = list(csv.reader(io.StringIO(exported.text)))
    assert header[: len(CSV_HEADER)] == CSV_HEADER
    expected = [["" if d[c] is None else str(d[c]) for c in header] for d in usage["days"]]
    assert rows == expected
    assert [(r.status_code, r.json()["error"]["code"]) for r in refused] == [(403, "forbidden")] * 2


async def test_memory_health_lists_each_tenants_lines_and_last_compaction(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with console(database_url, tmp_path, monkeypatch) as (client, app):
        keys = {
            "default": await tenant_key(client, "default"),
            "acme": await tenant_key(client, "acme", OVERFLOWING),
        }
        await remember(client, keys["acme"], "The office is in Lyon.")
        await remember(client, keys["acme"], "Invoices go out on Fridays.")
        before = ok(await client.get("/api/admin/memory-health", headers=OPERATOR))
        await chat(client, app, keys["acme"], turns=3)
        after = ok(await client.get("/api/admin/memory-health", headers=OPERATOR))
        lines = {tenant: len(await memory_of(client, key)) for tenant, key in keys.items()}
        as_admin = ok(await client.get("/api/admin/tenants/acme/memory", headers=OPERATOR))
        as_tenant = await memory_of(client, keys["acme"])

    health_before = {t["tenant_id"]: t for t in before["tenants"]}
    health = {t["tenant_id"]: t for t in after["tenants"]}
    assert set(health) == {"default", "acme"}
    assert health_before["acme"]["lines"] == 2 and health_before["acme"]["memories"] == 1
    assert health_before["acme"]["last_compaction_at"] is None
    assert lines["acme"] > 2  # the summarizer added its line
    assert {t: h["lines"] for t, h in health.items()} == lines
    assert health["acme"]["last_compaction_at"] is not None
    assert health["default"]["last_compaction_at"] is None
    assert {(h["scope"], h["status"], h["problems"] == []) for h in health.values()} == {
        ("tenant", "ok", True)
    }
    assert as_admin["entries"] == as_tenant


async def test_memory_health_counts_each_end_users_memory(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with console(database_url, tmp_path, monkeypatch) as (client, _):
        key = await tenant_key(client, "people", {"memory": {"scope": "user"}})
        for user in ("alice", "bob"):
            made = await client.post("/api/chat/sessions", headers=bearer(key), json={"user": user})
            assert made.status_code == 201, made.text
        await remember(client, key, "The shop opens at nine.")
        await remember(client, key, "Alice is vegetarian.", user="alice")
        await remember(client, key, "Alice lives in Oslo.", user="alice")
        health = ok(await client.get("/api/admin/memory-health", headers=OPERATOR))
        lines = [len(await memory_of(client, key, user)) for user in ("", "alice", "bob")]
        as_admin = await client.get(
            "/api/admin/tenants/people/memory", headers=OPERATOR, params={"user": "alice"}
        )
        as_alice = await memory_of(client, key, "alice")

    (people,) = [t for t in health["tenants"] if t["tenant_id"] == "people"]
    assert (people["scope"], people["memories"]) == ("user", 3)  # the shared one, alice, bob
    assert lines == [1, 2, 0] and people["lines"] == sum(lines)
    assert ok(as_admin)["entries"] == as_alice


async def operation(client: httpx.AsyncClient, app: FastAPI, kind: str) -> dict[str, Any]:
    """Start a `kind` operation on acme; it, read once it has ended."""
    started = await client.post(
        "/api/admin/tenants/acme/operations", headers=OPERATOR, json={"kind": kind}
    )
    assert started.status_code == 202, started.text
    assert started.json()["state"] == "running" and started.json()["kind"] == kind
    await app.state.operations.wait_idle()
    ended: dict[str, Any] = ok(
        await client.get(f"/api/admin/operations/{started.json()['id']}", headers=OPERATOR)
    )
    return ended


async def test_an_export_holds_exactly_the_tenants_lines(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with console(database_url, tmp_path, monkeypatch) as (client, app):
        key = await tenant_key(client, "acme")
        await remember(client, key, "The office is in Lyon.")
        await remember(client, key, "Invoices go out on Fridays.")
        await remember(client, await tenant_key(client, "globex"), "Not acme's.")
        export = await operation(client, app, "export")
        lines = await memory_of(client, key)
        document = await client.get(
            f"/api/admin/operations/{export['id']}/result", headers=OPERATOR
        )

    assert export["state"] == "done", export["message"]
    assert export["message"] == "2 lines of 1 memory"  # in words, not "line(s) of memory(ies)"
    assert export["done"] == export["total"] == 1
    assert export["result_url"] == f"/api/admin/operations/{export['id']}/result"
    (memory,) = ok(document)["memories"]
    assert ok(document)["tenant_id"] == "acme" and memory["user"] is None
    exported = [(e["id"], e["content"]) for e in memory["entries"]]
    assert exported == [(e["id"], e["content"]) for e in lines] and len(exported) == 2


async def test_resummarize_turns_raw_lines_into_summaries(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summarizer = FixedSummarizer(is_broken=True)
    failing_fast = {"max_summary_attempts": 1, "retry_base_s": 0.01, "overflow_batch": 2}
    async with console(
        database_url,
        tmp_path,
        monkeypatch,
        summarizer=summarizer,
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), **failing_fast},
    ) as (client, app):
        key = await tenant_key(client, "acme")
        nothing_raw = await operation(client, app, "resummarize")
        await chat(client, app, key, turns=4)  # every summary fails: raw lines
        raw = [e for e in await memory_of(client, key) if e["source"] == "auto-raw"]
        summarizer.is_broken = False
        fixed = await operation(client, app, "resummarize")
        after = await memory_of(client, key)
        bad_kind = await client.post(
            "/api/admin/tenants/acme/operations", headers=OPERATOR, json={"kind": "delete"}
        )
        listed = ok(await client.get("/api/admin/operations", headers=OPERATOR))["operations"]
        started = await audited(client, "acme", "operation.start")

    assert (nothing_raw["state"], nothing_raw["done"], nothing_raw["total"]) == ("done", 0, 0)
    assert nothing_raw["message"] == "re-summarized 0 of 0 raw lines"
    assert nothing_raw["result_url"] is None
    assert raw  # the window moved on past summaries that failed
    assert (fixed["state"], fixed["done"], fixed["total"]) == ("done", len(raw), len(raw))
    raw_lines = "1 raw line" if len(raw) == 1 else f"{len(raw)} raw lines"
    assert fixed["message"] == f"re-summarized {len(raw)} of {raw_lines}"
    assert not [e for e in after if e["source"] == "auto-raw"]
    assert any("green tea" in e["content"] for e in after)
    assert bad_kind.status_code == 422
    assert [o["id"] for o in listed] == [fixed["id"], nothing_raw["id"]]  # newest first
    assert [(e["target"], e["detail"]) for e in started] == [
        (nothing_raw["id"], {"kind": "resummarize"}),
        (fixed["id"], {"kind": "resummarize"}),
    ]


async def test_restarting_a_bot_that_does_not_exist_is_404(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with console(database_url, tmp_path, monkeypatch) as (client, _):
        restarted = await client.post(
            "/api/admin/tenants/default/bots/nope/restart", headers=OPERATOR
        )
        restarts = await audited(client, "default", "bot.restart")

    assert restarted.status_code == 404, restarted.text
    assert restarted.json()["error"]["code"] == "not_found"
    assert restarts == []


async def test_an_unreadable_memory_fails_its_export_and_shows_in_memory_health(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acme's memory folder is a file: the export ends `failed` saying why, with no document,
    and memory health names the problem instead of failing as a whole."""
    async with console(database_url, tmp_path, monkeypatch) as (client, app):
        await tenant_key(client, "acme")
        await tenant_key(client, "globex")
        (tmp_path / "data" / "memory").mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / "memory" / "acme").write_text("not a folder", encoding="utf-8")
        export = await operation(client, app, "export")
        document = await client.get(
            f"/api/admin/operations/{export['id']}/result", headers=OPERATOR
        )
        health = ok(await client.get("/api/admin/memory-health", headers=OPERATOR))

    assert export["state"] == "failed" and export["result_url"] is None
    assert "MemoryUnavailable" in export["message"], export["message"]
    assert document.status_code == 404
    by_tenant = {t["tenant_id"]: t for t in health["tenants"]}
    assert by_tenant["acme"]["status"] == "degraded" and by_tenant["acme"]["lines"] is None
    assert [p["code"] for p in by_tenant["acme"]["problems"]] == ["memory_unreadable"]
    assert by_tenant["globex"]["status"] == "ok" and by_tenant["globex"]["lines"] == 0
