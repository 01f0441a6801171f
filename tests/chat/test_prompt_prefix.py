"""A turn's request starts with the previous turn's request until an eviction, so the vendor's
prompt cache can reuse it: the time and the memory picked for each message travel after the
history, and only an eviction moves the window's start."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select

from backend.app import create_app
from backend.domain.requests import ChatRequest, RequestMessage
from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import overflow_jobs
from tests.chat.test_overflow import send
from tests.conftest import ManualClock, make_settings, serve
from tests.fakes.summarizer import EchoSummarizer

TURNS = 20
TOPICS = 30  # more facts than the prompt's standing memory holds: the rest are picked per message


def without_context(messages: tuple[RequestMessage, ...]) -> tuple[RequestMessage, ...]:
    return tuple(dataclasses.replace(message, context="") for message in messages)


def starts_with(request: ChatRequest, previous: ChatRequest) -> bool:
    """`request` begins with `previous` up to the end of its newest user message's text."""
    return (
        request.system == previous.system
        and request.tools == previous.tools
        and request.messages[: len(previous.messages)] == without_context(previous.messages)
    )


async def test_each_request_starts_with_the_previous_one_until_an_eviction(
    database_url: str, tmp_path: Path
) -> None:
    memory = tmp_path / "MEMORY.md"
    memory.write_text(
        "".join(
            f"2026-01-01|manual|the code word for topic{n} is word{n}\n" for n in range(TOPICS)
        ),
        encoding="utf-8",
    )
    clock = ManualClock(datetime(2026, 3, 1, 8, 0, tzinfo=UTC))  # two minutes a turn
    chat = ScriptedProvider(replies=["noted"])
    settings = make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 10},
        memory={"path": str(memory), "overflow_batch": 4},
    )
    app = create_app(settings, provider=chat, summarizer_provider=EchoSummarizer(), clock=clock)
    window_starts, jobs_done = [], []
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for turn in range(TURNS):
            clock.now += timedelta(minutes=2)
            await send(client, session_id, f"what is the code word for topic{turn}?")
            await app.state.services.runtimes.wait_idle()  # the eviction it triggered is done
            session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
            window_starts.append(session["window_start_id"])
            async with app.state.services.database.read() as conn:
                done = select(func.count()).where(overflow_jobs.c.status == "done")
                jobs_done.append((await conn.execute(done)).scalar_one())

    requests = chat.requests
    assert len(requests) == TURNS
    kept = moved = 0
    for turn in range(1, TURNS):
        previous, request = requests[turn - 1], requests[turn]
        # What turn `turn` was built from: the state after turn - 1 finished.
        did_move = turn >= 2 and window_starts[turn - 1] != window_starts[turn - 2]
        did_evict = turn >= 2 and jobs_done[turn - 1] != jobs_done[turn - 2]
        assert did_move == did_evict, "only an eviction moves the window's start"
        if did_move:
            moved += 1
        else:
            assert starts_with(request, previous), f"turn {turn} does not extend turn {turn - 1}"
            kept += 1
    assert moved >= 3 and kept >= 10  # both branches ran, and the property held most turns

    for turn, request in enumerate(requests):
        context = request.messages[-1].context
        # The time, to the second, and the fact picked for this message come after the
        # history, never in the system prompt, whose time is the date alone.
        stamp = datetime(2026, 3, 1, 8, 0, tzinfo=UTC) + timedelta(minutes=2 * (turn + 1))
        assert stamp.isoformat(timespec="seconds") in context
        assert f"word{turn}" in context + request.system
        assert stamp.isoformat(timespec="seconds") not in request.system
        assert [m.context for m in request.messages[:-1]] == [""] * (len(request.messages) - 1)
