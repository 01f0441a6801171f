"""A failed turn stays failed: its user message keeps the code and the cause until the turn is
answered, and the key kept with it resumes the turn without a second user message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider, ScriptedStreamCut
from backend.settings import Settings
from tests.conftest import make_settings, serve
from tests.sse import stream_turn

CAUSE = "acme (http://127.0.0.1:9/v1): connection refused"


async def stored(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/chat/sessions/{session_id}/messages")
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


async def test_a_failed_turn_keeps_its_code_and_cause_and_its_key_resumes_it(
    settings: Settings,
) -> None:
    provider = ScriptedProvider()
    provider.push(ProviderUnavailable(*CAUSE.split(": ")), "now it works")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        body = {"session_id": session_id, "message": "hello there"}
        failed = await client.post("/api/chat/send", json=body)
        after_failure = await stored(client, session_id)
        key = after_failure[0]["retry_key"]
        retried = await client.post("/api/chat/send", json=body, headers={"Idempotency-Key": key})
        after_retry = await stored(client, session_id)

    assert failed.status_code == 503
    (message,) = after_failure  # the user's message, and how its turn ended
    assert message["role"] == "user" and message["content"] == "hello there"
    assert message["failure"] == {"code": "provider_unavailable", "message": CAUSE}
    assert message["retry_key"].startswith("resume-turn_")
    assert retried.status_code == 200 and retried.json()["reply"] == "now it works"
    assert retried.json()["user_message_id"] == message["id"]  # the same turn, resumed
    assert [(m["role"], m["failure"], m["retry_key"]) for m in after_retry] == [
        ("user", None, None),
        ("assistant", None, None),
    ]


async def test_a_clients_own_key_is_the_one_that_resumes(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push(ProviderUnavailable(*CAUSE.split(": ")))
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        body = {"session_id": session_id, "message": "hi"}
        await client.post("/api/chat/send", json=body, headers={"Idempotency-Key": "mine-1"})
        (message,) = await stored(client, session_id)
    assert message["retry_key"] == "mine-1"


async def test_words_kept_before_a_failure_show_with_it(settings: Settings) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedStreamCut("Half a rep", ProviderUnavailable(*CAUSE.split(": "))))
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        events = await stream_turn(client, {"session_id": session_id, "message": "hi"})
        user, reply = await stored(client, session_id)
    assert events[-1][0] == "error"
    assert user["failure"]["code"] == "provider_unavailable"
    assert (reply["content"], reply["status"], reply["failure"]) == (
        "Half a rep",
        "incomplete",
        None,
    )


async def test_a_message_too_long_for_the_context_stays_failed(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        providers={"m": {"kind": "scripted"}},
        model={
            "provider": "m",
            "name": "gpt-4o-mini",
            "context_window": 600,
            "max_output_tokens": 100,
        },
        tools={"enabled": []},
    )
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        body = {"session_id": session_id, "message": "many words " * 400}
        refused = await client.post("/api/chat/send", json=body)
        (message,) = await stored(client, session_id)
    assert refused.json()["error"]["code"] == "context_too_long"
    assert message["failure"]["code"] == "context_too_long"
    assert message["failure"]["message"] == refused.json()["error"]["message"]
