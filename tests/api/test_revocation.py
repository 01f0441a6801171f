"""A turn in flight ends when its key is revoked or its tenant disabled: a stream with an
`unauthorized` error event, a JSON turn with a 401. The words already produced are stored
`incomplete`; the user message stays stored once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from backend.app import create_app
from backend.domain.messages import StoredMessage
from backend.providers.scripted import ScriptedProvider
from backend.storage.database import Database
from backend.storage.tenants import ApiKeyRepository
from tests.api.test_auth import ADMIN_KEY, bearer, make_tenant
from tests.conftest import make_settings, serve
from tests.sse import read_events
from tests.waiting import until

DEADLINE_S = 120
# 2,000 words at 20 ms each: about 40 s, far longer than any revocation takes to land.
LONG_REPLY = " ".join(f"word{i}" for i in range(2000))
UNAUTHORIZED = {
    "code": "unauthorized",
    "message": "the API key is no longer valid: the turn was stopped",
}
DISABLED = {"code": "tenant_disabled", "message": "the tenant was disabled: the turn was stopped"}
# How a turn ends, and the key's next request, when the key is revoked or its tenant disabled.
STOPPED = {"revoke": (UNAUTHORIZED, 401), "disable_tenant": (DISABLED, 403)}


@dataclass
class Served:
    client: httpx.AsyncClient
    app: FastAPI
    key: dict[str, Any]

    @property
    def headers(self) -> dict[str, str]:
        return bearer(self.key["key"])

    async def revoke(self) -> None:
        answer = await self.client.delete(
            f"/api/admin/keys/{self.key['id']}", headers=bearer(ADMIN_KEY)
        )
        assert answer.status_code == 204

    async def disable_tenant(self) -> None:
        answer = await self.client.patch(
            "/api/admin/tenants/acme", json={"disabled": True}, headers=bearer(ADMIN_KEY)
        )
        assert answer.status_code == 200

    async def messages(self, session_id: str) -> list[StoredMessage]:
        services = self.app.state.services
        found: list[StoredMessage] = await services.messages.window(
            tenant_id="acme", session_id=session_id, start_id=0, limit=None
        )
        return found


@asynccontextmanager
async def serving(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check_s: float
) -> AsyncIterator[Served]:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(
        database_url, tmp_path, auth={"mode": "keys", "revocation_check_s": check_s}
    )
    app = create_app(settings, provider=ScriptedProvider(replies=[LONG_REPLY], delay_s=0.02))
    async with serve(app) as client:
        yield Served(client, app, await make_tenant(client, "acme"))


@pytest.fixture
async def served(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    # A re-check period longer than any test: only this process's own notice can end a turn.
    async with serving(database_url, tmp_path, monkeypatch, check_s=3600) as served:
        yield served


async def stream_until_end(
    served: Served, stop: Callable[[], Awaitable[None]]
) -> tuple[list[str], dict[str, Any], str]:
    """Stream a turn, call `stop` once the first words arrived, and wait for the end:
    (event names, the final event's data, the session id)."""
    names: list[str] = []
    session_id = ""
    body = {"message": "tell me a long story", "stream": True}
    async with asyncio.timeout(DEADLINE_S):
        async with served.client.stream(
            "POST", "/api/chat/send", json=body, headers=served.headers, timeout=DEADLINE_S
        ) as response:
            assert response.status_code == 200
            async for name, data in read_events(response):
                names.append(name)
                session_id = session_id or data.get("session_id", "")
                if name == "text.delta" and names.count("text.delta") == 1:
                    await stop()
                if name in ("turn.completed", "error"):
                    return names, data, session_id
    raise AssertionError(f"the stream ended without a final event: {names}")


async def assert_stored_once_and_incomplete(
    served: Served, session_id: str, final: dict[str, Any]
) -> None:
    messages = await served.messages(session_id)
    assert [(m.role, m.status) for m in messages] == [
        ("user", "complete"),
        ("assistant", "incomplete"),
    ]
    assert messages[1].id == final["incomplete_message_id"]
    assert messages[1].content.startswith("word0") and len(messages[1].content) < len(LONG_REPLY)


@pytest.mark.parametrize("stop", ["revoke", "disable_tenant"])
async def test_a_streamed_turn_ends_when_its_key_stops(served: Served, stop: str) -> None:
    """Revoked: 401 `unauthorized`; its tenant disabled: 403 `tenant_disabled`, mid-stream and
    at the key's next request."""
    ended, status = STOPPED[stop]
    names, final, session_id = await stream_until_end(served, getattr(served, stop))
    assert names[-1] == "error" and "turn.completed" not in names
    assert {k: final[k] for k in ("code", "message")} == ended
    await assert_stored_once_and_incomplete(served, session_id, final)
    after = await served.client.get("/api/chat/sessions", headers=served.headers)
    assert after.status_code == status
    assert after.json()["error"]["code"] == ended["code"]


async def test_a_revocation_in_another_process_ends_the_turn_at_the_next_check(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process (here: another connection pool on the same database, as `tally keys
    revoke` is) gives no notice; the periodic re-check of the key row finds the revocation."""
    other_process = Database(database_url)
    async with serving(database_url, tmp_path, monkeypatch, check_s=0.2) as served:
        key_id = served.key["id"]

        async def revoke_elsewhere() -> None:
            await ApiKeyRepository(other_process).revoke(key_id=key_id)

        try:
            names, final, session_id = await stream_until_end(served, revoke_elsewhere)
        finally:
            await other_process.dispose()
        assert names[-1] == "error" and final["code"] == "unauthorized"
        await assert_stored_once_and_incomplete(served, session_id, final)


async def v1_stream_until_end(served: Served) -> tuple[list[Any], str]:
    """Stream a facade completion, revoke the key once the first words arrived, and read to
    the end: (the `data:` payloads, the session id)."""
    body = {"model": "any", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    headers = {**served.headers, "X-Tally-Session": "story"}
    payloads: list[Any] = []
    async with asyncio.timeout(DEADLINE_S):
        async with served.client.stream(
            "POST", "/v1/chat/completions", json=body, headers=headers, timeout=DEADLINE_S
        ) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line == "data: [DONE]":
                    return payloads, response.headers["X-Tally-Session-Id"]
                if line.startswith("data: "):
                    payloads.append(json.loads(line.removeprefix("data: ")))
                    words = [c["delta"].get("content") for c in payloads[-1].get("choices", [])]
                    if any(words) and len(payloads) == 2:  # after the role chunk
                        await served.revoke()
    raise AssertionError(f"the stream ended without [DONE]: {payloads}")


async def test_a_streamed_v1_completion_ends_unauthorized_when_its_key_is_revoked(
    served: Served,
) -> None:
    payloads, session_id = await v1_stream_until_end(served)
    error = payloads[-1]["error"]
    assert (error["code"], error["type"]) == ("unauthorized", "authentication_error")
    finishes = [c["finish_reason"] for p in payloads[:-1] for c in p.get("choices", [])]
    assert not any(finishes)  # never a finished reply
    messages = await served.messages(session_id)
    assert [(m.role, m.status) for m in messages] == [
        ("user", "complete"),
        ("assistant", "incomplete"),
    ]


@pytest.mark.parametrize("path", ["/api/chat/send", "/v1/chat/completions"])
async def test_a_json_turn_in_flight_is_answered_401_when_its_key_is_revoked(
    served: Served, path: str
) -> None:
    """A JSON caller has seen nothing yet: the turn stops as a stream does, and the answer is
    the 401 that any request with that key now gets."""
    session = await served.app.state.services.sessions.find_or_create(
        tenant_id="acme", channel="openai", external_key="story", user_key=None
    )
    body: dict[str, Any] = {"session_id": session.id, "message": "a long story, please"}
    headers = served.headers
    if path == "/v1/chat/completions":
        body = {"model": "any", "messages": [{"role": "user", "content": "a long story"}]}
        headers = {**served.headers, "X-Tally-Session": "story"}
    turn = asyncio.create_task(
        served.client.post(path, json=body, headers=headers, timeout=DEADLINE_S)
    )
    async with asyncio.timeout(DEADLINE_S):
        await until(lambda: served.messages(session.id), "the user's message stored", poll_s=0.05)
        await served.revoke()
        answer = await turn
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "unauthorized")
    messages = await served.messages(session.id)
    assert [m.role for m in messages][:1] == ["user"] and len(messages) <= 2
    assert all(m.status == "incomplete" for m in messages if m.role == "assistant")
