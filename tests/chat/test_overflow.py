"""The overflow summarizer end to end: the window rolls, every evicted message reaches memory
exactly once, and a fact from the first turn is still in the prompt three hundred turns later."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.domain.events import ProviderEvent
from backend.domain.messages import UserInput
from backend.domain.requests import ChatRequest
from backend.errors import ProviderTimeout, ProviderUnavailable
from backend.memory.entries import parse_document, render_lines, standard_header
from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import messages, overflow_jobs, sessions
from tests.conftest import make_settings, serve
from tests.fakes.summarizer import EchoSummarizer
from tests.prompt_text import prompt_text
from tests.waiting import until

EMAIL = "ada.lovelace@example.org"
GOOD_SUMMARY = "## Memory\n- the user likes tea\n\n## Summary\nSmall talk about tea."


def overflow_settings(database_url: str, tmp_path: Path, **memory: Any) -> Any:
    return make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 20},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 10, **memory},
    )


async def send(client: httpx.AsyncClient, session_id: str, text: str) -> dict[str, Any]:
    response = await client.post("/api/chat/send", json={"session_id": session_id, "message": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def window_size(client: httpx.AsyncClient, session_id: str) -> int:
    page = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()
    return len(page["messages"])


def covered_ids(memory_text: str, session_id: str) -> list[int]:
    ids: list[int] = []
    for entry in parse_document(memory_text).entries:
        provenance = entry.provenance
        assert provenance is not None and provenance.session_id == session_id
        ids += range(provenance.first_message_id, provenance.last_message_id + 1)
    return ids


@pytest.mark.slow
async def test_three_hundred_turns_roll_the_window_and_keep_every_fact(
    database_url: str, tmp_path: Path
) -> None:
    chat = ScriptedProvider(replies=["noted"])
    summarizer = EchoSummarizer()
    app = create_app(
        overflow_settings(database_url, tmp_path), provider=chat, summarizer_provider=summarizer
    )
    largest_window = 0
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await send(client, session_id, f"hello, my email is {EMAIL}")
        for turn in range(2, 300):
            await send(client, session_id, f"message number {turn}")
            await app.state.services.runtimes.wait_idle()
            largest_window = max(largest_window, await window_size(client, session_id))
        await send(client, session_id, "what is my email address?")
        await app.state.services.runtimes.wait_idle()
        async with app.state.services.database.read() as conn:
            stored = (await conn.execute(select(messages.c.id).order_by(messages.c.id))).all()
            session = (await conn.execute(select(sessions))).one()
    memory_text = (tmp_path / "MEMORY.md").read_text(encoding="utf-8")

    assert len(stored) == 600  # nothing lost: evicted messages stay archived
    evicted = [row.id for row in stored if row.id < session.window_start_id]
    covered = covered_ids(memory_text, session_id)
    assert len(covered) == len(set(covered)), "a message was distilled twice"
    assert set(evicted) <= set(covered), "an evicted message never reached memory"
    assert set(covered) <= {row.id for row in stored if row.id <= session.memory_watermark_id}
    assert largest_window <= 30
    assert EMAIL in prompt_text(chat.requests[-1])  # turn 1's fact, asked for in turn 300
    assert session.summary.startswith("The user sent")
    calls_per_100 = summarizer.calls / 3
    print(f"\nsummarizer calls per 100 turns: {calls_per_100:.1f} (a per-turn summarizer: 100)")
    assert 15 <= calls_per_100 <= 25


async def test_a_long_history_arrived_at_once_leaves_in_bounded_jobs(
    database_url: str, tmp_path: Path
) -> None:
    """120 turns stored at once (an import) overflow a window of 20 by 11,600 tokens: they
    leave in jobs one after another, none holding more than eight summarizer calls read
    (8 x 500 tokens), and every evicted message is distilled once."""
    summarizer = EchoSummarizer()
    app = create_app(
        overflow_settings(database_url, tmp_path, summarizer_input_tokens=500),
        provider=ScriptedProvider(replies=["noted"]),
        summarizer_provider=summarizer,
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        stored = app.state.services.messages
        for turn in range(120):
            said = UserInput(f"turn {turn}: " + "a long story " * 30)
            where = {"tenant_id": "default", "session_id": session_id, "turn_id": f"t{turn}"}
            await stored.add_user(**where, user_input=said, token_count=98)
            await stored.add_reply(**where, content="noted", status="complete", token_count=2)
        await send(client, session_id, "and one more")
        await app.state.services.runtimes.wait_idle()
        jobs = await journal(app)
        async with app.state.services.database.read() as conn:
            tokens = dict((await conn.execute(select(messages.c.id, messages.c.token_count))).all())
            session = (await conn.execute(select(sessions))).one()
    memory_text = (tmp_path / "MEMORY.md").read_text(encoding="utf-8")

    assert len(jobs) == 3 and [job.status for job in jobs] == ["done"] * 3
    for job, following in itertools.pairwise(jobs):
        assert following.first_message_id == job.next_start_id == job.last_message_id + 1
    for job in jobs:
        assert sum(tokens[i] for i in range(job.first_message_id, job.last_message_id + 1)) <= 4000
    evicted = list(range(jobs[0].first_message_id, session.window_start_id))
    assert jobs[-1].next_start_id == session.window_start_id and len(evicted) == 232
    assert sorted(covered_ids(memory_text, session_id)) == evicted
    assert summarizer.calls == 24  # 5 turns a call, as if one job had held them all


async def run_until_overflow(client: httpx.AsyncClient, session_id: str, turns: int = 11) -> None:
    for turn in range(turns):
        await send(client, session_id, f"turn {turn}")


async def journal(app: Any) -> list[Any]:
    async with app.state.services.database.read() as conn:
        return list((await conn.execute(select(overflow_jobs).order_by(overflow_jobs.c.id))).all())


async def journal_once(app: Any, holds: Callable[[Any], bool], what: str) -> list[Any]:
    """The journal, once its first job is in the state `holds` checks (jobs run meanwhile)."""

    async def journaled() -> list[Any]:
        jobs = await journal(app)
        return jobs if jobs and holds(jobs[0]) else []

    return await until(journaled, what)


async def test_failed_summaries_evict_nothing_and_are_retried(
    database_url: str, tmp_path: Path
) -> None:
    summarizer = ScriptedProvider()
    summarizer.push(
        ProviderTimeout("sum", "timed out"),
        ProviderUnavailable("sum", "HTTP 500"),
        "",  # an empty answer
        GOOD_SUMMARY,
    )
    app = create_app(
        overflow_settings(database_url, tmp_path, retry_base_s=0.01),
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=summarizer,
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await run_until_overflow(client, session_id)
        await app.state.services.runtimes.wait_idle()
        (job,) = await journal(app)
        session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
    assert job.status == "done" and job.attempts == 3
    assert "summary_failed" in job.last_error
    assert len(summarizer.requests) == 4
    memory = parse_document((tmp_path / "MEMORY.md").read_text(encoding="utf-8"))
    (entry,) = memory.entries
    assert entry.content == "the user likes tea"
    assert session["window_start_id"] == job.next_start_id
    assert session["summary"] == "Small talk about tea."


def copy_memory_header(tmp_path: Path) -> str:
    (tmp_path / "MEMORY.md").write_text(render_lines(standard_header("default", "")))
    return (tmp_path / "MEMORY.md").read_text(encoding="utf-8")


async def test_a_failing_summarizer_leaves_window_and_memory_untouched(
    database_url: str, tmp_path: Path
) -> None:
    summarizer = ScriptedProvider()
    summarizer.push(ProviderUnavailable("sum", "HTTP 500"))
    before = copy_memory_header(tmp_path)
    app = create_app(
        overflow_settings(database_url, tmp_path, retry_base_s=3600),
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=summarizer,
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await run_until_overflow(client, session_id)
        jobs = await journal_once(
            app, lambda job: job.attempts == 1, "the first attempt failed and journaled"
        )
        session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
        reply = await send(client, session_id, "still there?")  # the turn path is unaffected
    (job,) = jobs
    assert job.status == "pending" and job.attempts == 1
    assert session["window_start_id"] == 0 and session["summary"] == ""
    assert (tmp_path / "MEMORY.md").read_text(encoding="utf-8") == before
    assert reply["reply"] == "ok"


async def test_nothing_to_record_evicts_with_no_memory_line(
    database_url: str, tmp_path: Path
) -> None:
    summarizer = ScriptedProvider()
    summarizer.push("## Memory\n无需记录\n\n## Summary\n闲聊。")
    app = create_app(
        overflow_settings(database_url, tmp_path),
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=summarizer,
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await run_until_overflow(client, session_id)
        await app.state.services.runtimes.wait_idle()
        (job,) = await journal(app)
        session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
        memory = (await client.get("/api/memory")).json()
    assert job.status == "done" and job.memory_entry_id is None
    assert session["window_start_id"] == job.next_start_id > 0
    assert session["summary"] == "闲聊。"
    assert memory["entries"] == []


async def test_a_memory_write_that_fails_evicts_nothing_until_it_succeeds(
    database_url: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "memory-dir"
    blocker.write_text("a file where the memory folder should be", encoding="utf-8")
    settings = make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 20},
        memory={"path": str(blocker / "MEMORY.md"), "overflow_batch": 10, "retry_base_s": 0.3},
    )
    summarizer = ScriptedProvider(replies=[GOOD_SUMMARY])
    app = create_app(
        settings, provider=ScriptedProvider(replies=["ok"]), summarizer_provider=summarizer
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await run_until_overflow(client, session_id)
        jobs = await journal_once(
            app, lambda job: job.attempts >= 1, "the memory write failed once"
        )
        failed = (await client.get(f"/api/chat/sessions/{session_id}")).json()
        blocker.unlink()  # the disk is writable again
        blocker.mkdir()
        await app.state.services.runtimes.wait_idle()
        recovered = (await client.get(f"/api/chat/sessions/{session_id}")).json()
        (job,) = await journal(app)
    assert jobs[0].status == "summarized" and "memory" in jobs[0].last_error
    assert failed["window_start_id"] == 0 and failed["summary"] == ""
    assert job.status == "done" and recovered["window_start_id"] == job.next_start_id
    (entry,) = parse_document((blocker / "MEMORY.md").read_text(encoding="utf-8")).entries
    assert entry.content == "the user likes tea"
    assert len(summarizer.requests) == 1  # the saved summary was reused, not asked for again


async def test_summarizer_lines_are_dated_in_utc_whatever_the_servers_zone(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # UTC+14: for ten hours of each UTC day its date is already tomorrow's.
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    try:
        app = create_app(
            overflow_settings(database_url, tmp_path),
            provider=ScriptedProvider(replies=["ok"]),
            summarizer_provider=ScriptedProvider(replies=[GOOD_SUMMARY]),
        )
        before = datetime.now(UTC).date()
        async with serve(app) as client:
            session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
            await run_until_overflow(client, session_id)
            await app.state.services.runtimes.wait_idle()
        after = datetime.now(UTC).date()
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    entries = parse_document((tmp_path / "MEMORY.md").read_text(encoding="utf-8")).entries
    assert entries and all(e.date in {before, after} for e in entries)


class GatedSummarizer(EchoSummarizer):
    """Answers once `gate` opens, counting the summaries it is asked for at the same time."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.running = 0
        self.most_at_once = 0

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await self.gate.wait()
            async for event in super().stream(request):
                yield event
        finally:
            self.running -= 1


async def test_a_burst_of_due_summaries_runs_a_few_at_a_time_and_all_finish(
    database_url: str, tmp_path: Path
) -> None:
    """Six sessions overflow together: turns go on, two summaries run at once
    (memory.summarizer_jobs), the others wait journaled, and every one is written."""
    summarizer = GatedSummarizer()
    app = create_app(
        overflow_settings(database_url, tmp_path, summarizer_jobs=2),
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=summarizer,
    )
    async with serve(app) as client:
        session_ids = [
            (await client.post("/api/chat/sessions", json={})).json()["id"] for _ in range(6)
        ]
        for session_id in session_ids:
            await run_until_overflow(client, session_id)
        await until(lambda: summarizer.running == 2, "two summaries asked for")
        await until(
            lambda: _journaled(app, 6), "every session's job journaled while two of them run"
        )
        assert summarizer.running == 2  # the other four wait for a slot, not for the model
        summarizer.gate.set()
        await app.state.services.runtimes.wait_idle()
        jobs = await journal(app)
    assert summarizer.most_at_once == 2 and summarizer.calls == 6
    assert [job.status for job in jobs] == ["done"] * 6
    memory = parse_document((tmp_path / "MEMORY.md").read_text(encoding="utf-8"))
    assert {entry.provenance.session_id for entry in memory.entries if entry.provenance} == set(
        session_ids
    )


async def _journaled(app: Any, count: int) -> bool:
    return len(await journal(app)) >= count
