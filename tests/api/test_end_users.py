"""A tenant's own app gives each of its end users their own memory through the HTTP API, not
only through `/v1`: `user` on session creation and on `POST /api/chat/send` names the end user,
and with `memory.scope: user` a fact of one never reaches another's prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.conftest import make_settings, serve


def per_user(database_url: str, tmp_path: Path) -> Any:
    return make_settings(database_url, tmp_path, memory={"scope": "user"})


def prompt_of(provider: ScriptedProvider) -> str:
    """What the newest request carried besides the history: the system prompt and the turn's
    context."""
    request = provider.requests[-1]
    return request.system + "".join(m.context or "" for m in request.messages)


async def remember(client: httpx.AsyncClient, user: str, fact: str) -> None:
    added = await client.post("/api/memory/entries", params={"user": user}, json={"content": fact})
    assert added.status_code == 201, added.text


async def test_each_end_user_reads_only_their_own_memory(database_url: str, tmp_path: Path) -> None:
    provider = ScriptedProvider()
    app = create_app(per_user(database_url, tmp_path), provider=provider)
    async with serve(app) as client:
        await remember(client, "alice", "Alice's locker code is 4711")
        created = await client.post("/api/chat/sessions", json={"user": "alice"})
        alice = created.json()
        await client.post(
            "/api/chat/send", json={"session_id": alice["id"], "message": "my locker code?"}
        )
        alice_prompt = prompt_of(provider)
        bob = await client.post(
            "/api/chat/send", json={"message": "my locker code?", "user": "bob"}
        )
        bob_prompt = prompt_of(provider)
        bob_session = await client.get(f"/api/chat/sessions/{bob.json()['session_id']}")

    assert created.status_code == 201 and alice["user"] == "alice"
    assert "4711" in alice_prompt
    assert bob.status_code == 200 and "4711" not in bob_prompt
    assert bob_session.json()["user"] == "bob"


async def test_what_the_model_remembers_goes_to_that_end_users_memory(
    database_url: str, tmp_path: Path
) -> None:
    provider = ScriptedProvider()
    provider.push(
        ScriptedToolCalls([ToolCall("c1", "memory_write", {"fact": "Bob is vegetarian"})]),
        "Noted.",
    )
    app = create_app(per_user(database_url, tmp_path), provider=provider)
    async with serve(app) as client:
        await client.post("/api/chat/send", json={"message": "I am vegetarian", "user": "bob"})
        bobs = (await client.get("/api/memory", params={"user": "bob"})).json()
        alices = (await client.get("/api/memory", params={"user": "alice"})).json()
    assert [e["content"] for e in bobs["entries"]] == ["Bob is vegetarian"]
    assert alices["entries"] == []


async def test_a_session_is_never_used_for_another_end_user(
    database_url: str, tmp_path: Path
) -> None:
    app = create_app(per_user(database_url, tmp_path), provider=ScriptedProvider())
    async with serve(app) as client:
        alice = (await client.post("/api/chat/sessions", json={"user": "alice"})).json()
        unnamed = (await client.post("/api/chat/sessions", json={})).json()
        as_bob = await client.post(
            "/api/chat/send", json={"session_id": alice["id"], "message": "hi", "user": "bob"}
        )
        into_unnamed = await client.post(
            "/api/chat/send", json={"session_id": unnamed["id"], "message": "hi", "user": "bob"}
        )
        as_alice = await client.post(
            "/api/chat/send", json={"session_id": alice["id"], "message": "hi", "user": "alice"}
        )
        stored = await client.get(f"/api/chat/sessions/{alice['id']}/messages")
        blank = await client.post("/api/chat/sessions", json={"user": ""})
        broken = [
            await client.post("/api/chat/sessions", json={"user": "bob\nsmith"}),
            await client.post("/api/chat/send", json={"message": "hi", "user": "a\tb"}),
        ]
        sessions = (await client.get("/api/chat/sessions")).json()

    for refused in (as_bob, into_unnamed):
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "session_user_mismatch"
    assert as_alice.status_code == 200
    assert [m["content"] for m in stored.json()["messages"] if m["role"] == "user"] == ["hi"]
    assert blank.status_code == 422
    for refused in broken:  # refused before anything is stored, not after
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_text"
    assert sessions["total"] == 2  # alice's and the unnamed one
