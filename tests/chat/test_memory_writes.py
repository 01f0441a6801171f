"""When memory is written, and what each write costs: facts dated the day their words were
said; an eviction of what memory holds already calls no model; the tail of a session that went
quiet, or was left with /new, reaches memory."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from sqlalchemy import select

from backend.app import create_app
from backend.domain.clock import utc_now
from backend.memory.entries import parse_document
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings
from backend.storage.tables import overflow_jobs, sessions
from tests.chat.test_overflow import overflow_settings, send
from tests.conftest import ManualClock, serve
from tests.fakes.summarizer import EchoSummarizer


def echo_app(
    settings: Settings, summarizer: EchoSummarizer, clock: Callable[[], datetime] = utc_now
) -> FastAPI:
    """Tally answering "ok", its summarizer writing each new user message as a fact."""
    return create_app(
        settings,
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=summarizer,
        clock=clock,
    )


async def journal(app: Any) -> list[Any]:
    async with app.state.services.database.read() as conn:
        return list((await conn.execute(select(overflow_jobs).order_by(overflow_jobs.c.id))).all())


async def session_row(app: Any) -> Any:
    async with app.state.services.database.read() as conn:
        return (await conn.execute(select(sessions))).one()


def memory_lines(tmp_path: Path) -> list[Any]:
    path = tmp_path / "MEMORY.md"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return list(parse_document(text).entries)


async def test_an_eviction_of_what_memory_holds_calls_no_model(
    database_url: str, tmp_path: Path
) -> None:
    summarizer = EchoSummarizer()
    settings = overflow_settings(
        database_url, tmp_path, auto_summarize={"min_messages": 8, "min_chars": 100_000}
    )
    app = echo_app(settings, summarizer)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for turn in range(40):
            await send(client, session_id, f"my note number {turn} is kept")
            await app.state.services.runtimes.wait_idle()
        jobs = await journal(app)
        session = await session_row(app)

    evictions = [job for job in jobs if job.kind == "overflow"]
    distilled_before = [job for job in evictions if job.memory_from_id > job.last_message_id]
    assert distilled_before, "the automatic write distilled the evicted messages first"
    assert summarizer.calls == len(jobs) - len(distilled_before)  # those called no model
    called = [job for job in jobs if job not in distilled_before]
    assert all(job.memory_line for job in called)  # every call wrote memory
    # The running summary is the one the automatic write made with its line.
    assert session.summary in {job.summary for job in jobs if job.kind == "auto"}


async def test_facts_carry_the_day_their_words_were_said(database_url: str, tmp_path: Path) -> None:
    clock = ManualClock(datetime(2026, 3, 14, 22, 0, tzinfo=UTC))
    summarizer = EchoSummarizer()
    settings = overflow_settings(
        database_url, tmp_path, auto_summarize={"min_messages": 4, "min_chars": 100_000}
    )
    app = echo_app(settings, summarizer, clock)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await send(client, session_id, "I ran a half marathon yesterday")
        clock.now += timedelta(days=1)
        await send(client, session_id, "my knees hurt today")
        await app.state.services.runtimes.wait_idle()

    (line,) = memory_lines(tmp_path)
    assert line.date.isoformat() == "2026-03-15"  # the day its last words were said
    prompt = summarizer.requests[0].messages[-1].content
    assert "(said on 2026-03-14)\n[new] user: I ran a half marathon yesterday" in prompt
    assert "(said on 2026-03-15)\n[new] user: my knees hurt today" in prompt


async def test_a_session_that_went_quiet_has_its_tail_distilled(
    database_url: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    settings = overflow_settings(database_url, tmp_path, distill_quiet_after_s=600)
    app = echo_app(settings, EchoSummarizer(), clock)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await send(client, session_id, "my flight to Lima is on 3 May")
        quiet = app.state.services.quiet_sessions
        clock.now += timedelta(seconds=300)
        handed_early = await quiet.sweep()
        clock.now += timedelta(seconds=301)
        handed = await quiet.sweep()
        await app.state.services.runtimes.wait_idle()
        handed_again = await quiet.sweep()
        session = await session_row(app)

    assert (handed_early, handed, handed_again) == (0, 1, 0)
    (line,) = memory_lines(tmp_path)
    assert "my flight to Lima is on 3 May" in line.content
    assert line.provenance is not None and line.provenance.session_id == session_id
    assert session.memory_watermark_id == 2 and session.window_start_id == 0  # nothing evicted


async def tell_then_go_quiet(database_url: str, tmp_path: Path, said: list[str]) -> Any:
    """Send `said` in one session (memory writes itself every two turns), let the session go
    quiet and sweep it twice; the app, its summarizer and the sweeps' counts."""
    clock = ManualClock()
    summarizer = EchoSummarizer()
    settings = overflow_settings(
        database_url,
        tmp_path,
        distill_quiet_after_s=600,
        auto_summarize={"min_messages": 4, "min_chars": 100_000},
    )
    app = echo_app(settings, summarizer, clock)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for text in said:
            await send(client, session_id, text)
            await app.state.services.runtimes.wait_idle()
        calls_before_quiet = summarizer.calls
        clock.now += timedelta(seconds=601)
        handed = await app.state.services.quiet_sessions.sweep()
        await app.state.services.runtimes.wait_idle()
        handed_again = await app.state.services.quiet_sessions.sweep()
        session = await session_row(app)
    return calls_before_quiet, summarizer.calls, (handed, handed_again), session


async def test_a_short_leftover_of_small_talk_calls_no_model(
    database_url: str, tmp_path: Path
) -> None:
    said = ["my flight to Lima is on 3 May", "my seat is by the window", "it rained all day"]
    before, after, sweeps, session = await tell_then_go_quiet(database_url, tmp_path, said)

    assert (before, after) == (1, 1)  # the automatic write only; the leftover made no call
    assert sweeps == (1, 0)  # looked at once, not again at every sweep
    assert session.memory_watermark_id == 6  # past the leftover: it is not distilled again
    (line,) = memory_lines(tmp_path)
    assert "it rained" not in line.content


async def test_a_short_leftover_that_says_something_is_distilled(
    database_url: str, tmp_path: Path
) -> None:
    said = ["my flight to Lima is on 3 May", "my seat is by the window", "we meet Ines there"]
    before, after, sweeps, session = await tell_then_go_quiet(database_url, tmp_path, said)

    assert (before, after) == (1, 2)
    assert sweeps == (1, 0)
    assert session.memory_watermark_id == 6
    assert "we meet Ines there" in memory_lines(tmp_path)[-1].content


async def test_a_session_never_distilled_goes_to_the_model_however_small(
    database_url: str, tmp_path: Path
) -> None:
    before, after, _, session = await tell_then_go_quiet(
        database_url, tmp_path, ["it rained all day"]
    )

    assert (before, after) == (0, 1)  # its tail is all memory would learn of it
    assert session.memory_watermark_id == 2
