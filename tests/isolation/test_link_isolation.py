"""Linking and confirmation never cross tenants: acme and globex, in keys mode with
`memory.scope: user`, each link two identities of an end user with the same name. globex
redeeming acme's code is refused exactly like a code that does not exist; globex's reads, lists
and removals of links (with its chat key and its admin key) never show or change acme's; acme's
person keeps its memory whatever globex did; and acme's proposed memory lines are neither seen
nor answered by globex."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from backend.app import create_app
from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.api.test_auth import ADMIN_KEY
from tests.conftest import serve
from tests.isolation.conftest import OPERATOR, Tenant, isolation_settings, open_tenant


async def link_pair(client: httpx.AsyncClient, tenant: Tenant) -> None:
    """`ada` and `ada-web` of `tenant` linked; a fact of ada's remembered."""
    code = await client.post("/api/people/link-codes", headers=tenant.chat, json={"user": "ada"})
    assert code.status_code == 201, code.text
    body = {"user": "ada-web", "code": code.json()["code"]}
    linked = await client.post("/api/people/links", headers=tenant.chat, json=body)
    assert linked.status_code == 200, linked.text
    fact = {"content": f"{tenant.id}-ada-secret"}
    added = await client.post(
        "/api/memory/entries", headers=tenant.chat, params={"user": "ada"}, json=fact
    )
    assert added.status_code == 201, added.text


async def test_no_tenant_redeems_reads_or_removes_another_tenants_links(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = isolation_settings(database_url, tmp_path, scope="user")
    app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
    leaks: list[str] = []
    async with serve(app) as client:
        acme, globex = [await open_tenant(client, name) for name in ("acme", "globex")]
        for tenant in (acme, globex):
            await link_pair(client, tenant)
        acme_links = await client.get("/api/admin/tenants/acme/links", headers=OPERATOR)

        # acme's fresh code, redeemed by globex: answered like a code that never existed.
        issued = await client.post("/api/people/link-codes", headers=acme.chat, json={"user": "x"})
        code = issued.json()["code"]
        for headers in (globex.chat, globex.admin):
            stolen = await client.post(
                "/api/people/links", headers=headers, json={"user": "mallory", "code": code}
            )
            unknown = await client.post(
                "/api/people/links", headers=headers, json={"user": "mallory", "code": "ABCD-EFGH"}
            )
            if (stolen.status_code, stolen.text) != (unknown.status_code, unknown.text):
                leaks.append(f"acme's code redeemed by globex: {stolen.status_code} {stolen.text}")
        # The code is still good in acme: globex's attempts did not use it up.
        own = await client.post(
            "/api/people/links", headers=acme.chat, json={"user": "y", "code": code}
        )

        # globex's reads and removals of links touch only globex's.
        for headers in (globex.chat, globex.admin):
            read = await client.get("/api/people/links", headers=headers, params={"user": "ada"})
            if "acme" in read.text or sorted(read.json()["identities"]) != ["ada", "ada-web"]:
                leaks.append(f"globex reading ada's link: {read.text}")
            listed = await client.get("/api/admin/tenants/acme/links", headers=globex.admin)
            if listed.status_code != 404:
                leaks.append(f"globex listing acme's links: {listed.status_code} {listed.text}")
            removed = await client.delete(
                "/api/admin/tenants/acme/links", headers=globex.admin, params={"user": "ada"}
            )
            if removed.status_code != 404:
                leaks.append(f"globex removing acme's link: {removed.status_code} {removed.text}")
        gone = await client.delete("/api/people/links", headers=globex.chat, params={"user": "ada"})

        after = await client.get("/api/admin/tenants/acme/links", headers=OPERATOR)
        acme_memory = await client.get("/api/memory", headers=acme.chat, params={"user": "ada-web"})
        globex_memory = await client.get(
            "/api/memory", headers=globex.chat, params={"user": "ada-web"}
        )

    assert leaks == []
    assert own.status_code == 200, own.text
    assert gone.status_code == 204  # globex's own ada, unlinked in globex only
    before_users = sorted(i["user"] for i in acme_links.json()["identities"])
    after_users = sorted(i["user"] for i in after.json()["identities"])
    assert before_users == ["ada", "ada-web"] and after_users == ["ada", "ada-web", "x", "y"]
    assert "acme-ada-secret" in acme_memory.text and "globex" not in acme_memory.text
    assert "acme" not in globex_memory.text


async def test_no_tenant_sees_or_answers_another_tenants_proposed_lines(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = isolation_settings(database_url, tmp_path, scope="user", confirm_writes=True)
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        acme, globex = [await open_tenant(client, name) for name in ("acme", "globex")]
        write = ToolCall(id="w", name="memory_write", arguments={"fact": "acme-ada-secret"})
        provider.push(ScriptedToolCalls([write]), "Shall I?")
        sent = await client.post(
            "/api/chat/send", headers=acme.chat, json={"message": "remember", "user": "ada"}
        )
        assert sent.status_code == 200, sent.text
        listed = await client.get(
            "/api/memory/proposals", headers=acme.chat, params={"user": "ada"}
        )
        (proposal,) = listed.json()["proposals"]
        answers = []
        for headers in (globex.chat, globex.admin):
            seen = await client.get(
                "/api/memory/proposals", headers=headers, params={"user": "ada"}
            )
            decision = {"approved": True}
            theirs = await client.post(
                f"/api/memory/proposals/{proposal['id']}/decision", headers=headers, json=decision
            )
            unknown = await client.post(
                "/api/memory/proposals/987654321/decision", headers=headers, json=decision
            )
            answers.append(
                (
                    seen.json(),
                    theirs.text.replace(proposal["id"], "<id>"),
                    unknown.text.replace("987654321", "<id>"),
                )
            )
        still = await client.get("/api/memory/proposals", headers=acme.chat, params={"user": "ada"})
        memory = await client.get("/api/memory", headers=acme.chat, params={"user": "ada"})

    for seen, theirs, unknown in answers:
        assert seen == {"proposals": []}
        assert theirs == unknown
    assert still.json()["proposals"] == [proposal]
    assert "acme-ada-secret" not in memory.text  # nobody approved it
