"""A streaming turn's events through Redis: a client whose connection to one process dropped
reconnects to another with `Last-Event-ID` and reads the rest, and its reading keeps the turn
alive; a turn is only readable by its own tenant; without Redis the turn still streams where
it runs, and a reconnect elsewhere is a clear 503."""

from __future__ import annotations

from pathlib import Path

import httpx

from backend.coordination.journal import JournalEntry
from backend.coordination.redis import RedisCoordinator
from backend.providers.scripted import ScriptedProvider
from tests.api.test_stream_resume import LONG_REPLY, cut_after, resume, stored_reply, text_of
from tests.coordination.test_redis_coordination import two_processes
from tests.sse import stream_turn
from tests.waiting import until


async def copied_events(client: httpx.AsyncClient, turn_id: str) -> httpx.Response | None:
    """The turn's events from another process, once it has them (it streams to the end)."""
    copied = await client.get(f"/api/chat/turns/{turn_id}/events")
    return copied if copied.status_code == 200 else None


async def test_a_stream_cut_on_one_process_resumes_on_another(
    postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    slow = ScriptedProvider(delay_s=0.05)  # about 10 s, longer than sse_resume_s
    slow.push(LONG_REPLY)
    coordination = {"redis_url": redis_url, "key_prefix": redis_prefix}
    async with two_processes(
        postgres, tmp_path, coordination, (slow, ScriptedProvider()), server={"sse_resume_s": 3}
    ) as (a, b):
        session_id = (await a.post("/api/chat/sessions", json={})).json()["id"]
        body = {"session_id": session_id, "message": "long please", "stream": True}
        seen = await cut_after(a, body, deltas=5)
        rest = await resume(b, seen[0][2]["turn_id"], seen[-1][0])
        reply = await stored_reply(a, session_id)
    events = seen + rest
    assert [event_id for event_id, _, _ in events] == list(range(1, len(events) + 1))
    assert text_of(events) == LONG_REPLY and events[-1][1] == "turn.completed"
    assert (reply["status"], reply["content"]) == ("complete", LONG_REPLY)


async def test_a_turns_journal_is_read_only_under_its_own_tenant(
    redis_url: str, redis_prefix: str
) -> None:
    coordinator = RedisCoordinator(redis_url, prefix=redis_prefix)
    journal = coordinator.journal
    try:
        await journal.publish("acme", "turn_1", [JournalEntry(1, "id: 1\n\n")], keep_s=60)
        own = await journal.read("acme", "turn_1", after=0, wait_s=0)
        other = await journal.read("globex", "turn_1", after=0, wait_s=0)
    finally:
        await coordinator.aclose()
    assert own == [JournalEntry(1, "id: 1\n\n")]
    assert other is None


async def test_without_redis_a_stream_runs_and_a_reconnect_elsewhere_is_a_503(
    postgres: str, tmp_path: Path
) -> None:
    coordination = {"redis_url": "redis://127.0.0.1:1/0"}  # nothing listens there
    async with two_processes(postgres, tmp_path, coordination) as (a, b):
        events = await stream_turn(a, {"message": "hi"})
        elsewhere = await b.get(f"/api/chat/turns/{events[0][1]['turn_id']}/events")
    assert events[-1][0] == "turn.completed"
    assert elsewhere.status_code == 503 and "Retry-After" in elsewhere.headers
    assert elsewhere.json()["error"]["code"] == "coordination_unavailable"


async def test_a_reconnect_past_the_last_event_elsewhere_ends_at_once(
    postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    coordination = {"redis_url": redis_url, "key_prefix": redis_prefix}
    async with two_processes(postgres, tmp_path, coordination) as (a, b):
        events = await stream_turn(a, {"message": "hi"})
        turn_id = events[0][1]["turn_id"]
        copied = await until(  # the owner copies its events to Redis in the background
            lambda: copied_events(b, turn_id), "the turn's events in Redis", poll_s=0.05
        )
        past_the_end = await resume(b, turn_id, len(events))
    assert copied.text.count("\nevent: ") == len(events)  # each after its id: line
    assert past_the_end == []  # nothing more will come: not a wait for a turn that ended
