"""A client whose SSE connection dropped reconnects with `Last-Event-ID` and gets the rest of
the turn, no event lost or repeated; a client that does not come back has its turn cancelled
after `server.sse_resume_s`, keeping the words said so far (docs/api.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings
from tests.api.test_chat_send import messages_of, new_session
from tests.conftest import make_settings, serve
from tests.sse import read_events_with_ids
from tests.waiting import until

Event = tuple[int | None, str, dict[str, Any]]
LONG_REPLY = " ".join(f"w{i}" for i in range(200))
STORED_TIMEOUT_S = 60.0


async def cut_after(client: httpx.AsyncClient, body: dict[str, Any], deltas: int) -> list[Event]:
    """The turn's events up to its `deltas`-th text delta; then the connection drops."""
    seen: list[Event] = []
    async with client.stream("POST", "/api/chat/send", json=body) as response:
        async for event in read_events_with_ids(response):
            seen.append(event)
            if sum(name == "text.delta" for _, name, _ in seen) == deltas:
                break
    return seen


async def resume(client: httpx.AsyncClient, turn_id: str, last_id: int | None) -> list[Event]:
    headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
    url = f"/api/chat/turns/{turn_id}/events"
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        return [event async for event in read_events_with_ids(response)]


async def stored_reply(client: httpx.AsyncClient, session_id: str) -> dict[str, object]:
    """The session's assistant message, once the turn has stored it."""

    async def replies() -> list[dict[str, object]]:
        return [m for m in await messages_of(client, session_id) if m["role"] == "assistant"]

    found = await until(replies, "the turn's reply stored", timeout_s=STORED_TIMEOUT_S, poll_s=0.05)
    return found[0]


def text_of(events: list[Event]) -> str:
    return "".join(data["text"] for _, name, data in events if name == "text.delta")


@pytest.mark.slow
async def test_a_dropped_stream_resumes_with_nothing_lost_or_repeated(
    database_url: str, tmp_path: Path
) -> None:
    # The reply takes seconds, longer than sse_resume_s: the turn outlives the first client
    # only because the second reads it.
    settings = make_settings(database_url, tmp_path, server={"sse_resume_s": 3})
    provider = ScriptedProvider(delay_s=0.05)
    provider.push(LONG_REPLY)
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        body = {"session_id": session_id, "message": "long please", "stream": True}
        seen = await cut_after(client, body, deltas=5)
        turn_id = seen[0][2]["turn_id"]
        rest = await resume(client, turn_id, seen[-1][0])
        reply = await stored_reply(client, session_id)
    events = seen + rest
    assert [event_id for event_id, _, _ in events] == list(range(1, len(events) + 1))
    assert text_of(events) == LONG_REPLY
    assert events[-1][1] == "turn.completed"
    assert (reply["status"], reply["content"]) == ("complete", LONG_REPLY)


async def test_a_reconnect_after_the_turn_ended_still_gets_its_last_events(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(database_url, tmp_path, server={"sse_resume_s": 60})
    provider = ScriptedProvider()
    provider.push("one two three four five six")
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        body = {"session_id": session_id, "message": "hi", "stream": True}
        seen = await cut_after(client, body, deltas=2)
        await stored_reply(client, session_id)
        turn_id = seen[0][2]["turn_id"]
        rest = await resume(client, turn_id, seen[-1][0])
        from_start = await resume(client, turn_id, None)
    assert text_of(seen + rest) == "one two three four five six"
    assert rest[0][0] == seen[-1][0] + 1
    assert from_start == seen + rest  # no Last-Event-ID: the whole turn


@pytest.mark.parametrize("resume_s", [0, 0.2])
async def test_a_client_that_does_not_come_back_has_its_turn_cancelled(
    database_url: str, tmp_path: Path, resume_s: float
) -> None:
    settings = make_settings(database_url, tmp_path, server={"sse_resume_s": resume_s})
    provider = ScriptedProvider(delay_s=0.05)
    provider.push(" ".join(f"w{i}" for i in range(2_000)))  # 100 s, unless cancelled
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = await new_session(client)
        body = {"session_id": session_id, "message": "long please", "stream": True}
        seen = await cut_after(client, body, deltas=3)
        reply = await stored_reply(client, session_id)
        turn_id = seen[0][2]["turn_id"]
        rest = await resume(client, turn_id, seen[-1][0])
    assert reply["status"] == "incomplete"
    assert len(str(reply["content"]).split()) < 2_000
    assert rest[-1][1] == "error" and rest[-1][2]["code"] == "cancelled"


async def test_resuming_an_unknown_turn_or_from_a_bad_id_is_a_clear_error(
    settings: Settings,
) -> None:
    async with serve(create_app(settings, provider=ScriptedProvider())) as client:
        unknown = await client.get("/api/chat/turns/turn_0123456789abcdef/events")
        bad_ids = [
            await client.get(
                "/api/chat/turns/turn_0123456789abcdef/events", headers={"Last-Event-ID": v}
            )
            for v in ("seven", "-1")
        ]
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "turn_not_found"
    assert [r.status_code for r in bad_ids] == [422, 422]
