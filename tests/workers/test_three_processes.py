"""Three Tally processes on different ports, sharing one PostgreSQL database and one Redis on
loopback, started together on an empty database: turns of one session serialize across them, a
cancel sent to any of them stops the turn another runs, an SSE stream cut midway resumes on
another with no token lost or repeated, a 5-per-minute limit admits exactly 5 across them, and
the summary of a process killed with SIGKILL is finished by another, once."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.api.test_stream_resume import LONG_REPLY, cut_after, resume, text_of
from tests.crash import MAX_HISTORY_MESSAGES, ServerFiles, TallyProcess, write_config
from tests.fakes import Delay, Text
from tests.fakes.openai_server import FakeOpenAIServer
from tests.sse import read_events
from tests.waiting import until

pytestmark = pytest.mark.process

LEASE_S = 2  # the summarizer's lease, and the live workers' sweep for dead workers' jobs
RESUME_TIMEOUT_S = 60.0


def shared_config(
    tmp_path: Path, upstream: FakeOpenAIServer, postgres: str, redis_url: str, prefix: str
) -> ServerFiles:
    files = write_config(tmp_path, upstream_url=upstream.base_url)
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["database"] = {"url": postgres}
    config["coordination"] = {"redis_url": redis_url, "key_prefix": prefix}
    config["memory"] |= {"store": "database", "lease_s": LEASE_S}
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


def with_quota(files: ServerFiles, per_minute: int) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["quotas"] = {"requests_per_minute": per_minute}
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@contextmanager
def three(files: ServerFiles, *failpoints: tuple[str, ...]) -> Iterator[list[TallyProcess]]:
    """Three processes, all spawned before any is waited for: they start together."""
    spawned = [TallyProcess(files, failpoints=f) for f in (*failpoints, (), (), ())[:3]]
    with ExitStack() as stack:
        for process in spawned:
            stack.callback(process.stop)
        for process in spawned:
            stack.enter_context(process)
        yield spawned


async def fetch(postgres: str, sql: str, **params: Any) -> list[Any]:
    engine = create_async_engine(postgres)
    try:
        async with engine.connect() as conn:
            return list(await conn.execute(text(sql), params))
    finally:
        await engine.dispose()


async def new_session(client: httpx.AsyncClient) -> str:
    return str((await client.post("/api/chat/sessions", json={})).json()["id"])


async def send(client: httpx.AsyncClient, session_id: str, message: str) -> httpx.Response:
    return await client.post("/api/chat/send", json={"session_id": session_id, "message": message})


async def test_three_processes_serialize_turns_cancel_anywhere_and_finish_a_dead_ones_summary(
    upstream: FakeOpenAIServer, postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    files = shared_config(tmp_path, upstream, postgres, redis_url, redis_prefix)
    with three(files, ("overflow.summarized",)) as (doomed, first, second):
        clients = [httpx.AsyncClient(base_url=p.base_url, timeout=60) for p in (first, second)]
        a, b = clients
        try:
            # Turns of one session, sent at once to two processes, run one at a time: each
            # reply answers the message just before it (the fake echoes the last user text).
            session_id = await new_session(a)
            sent = await asyncio.gather(
                *(send(client, session_id, f"message {n}") for n, client in enumerate([a, b] * 2))
            )
            assert [r.status_code for r in sent] == [200] * 4
            rows = await fetch(
                postgres,
                "SELECT role, content FROM messages WHERE session_id = :s ORDER BY id",
                s=session_id,
            )
            pairs = list(zip(rows[::2], rows[1::2], strict=True))
            assert len(pairs) == 4
            for user, reply in pairs:
                assert (user.role, reply.role) == ("user", "assistant")
                assert reply.content == f"ok: {user.content}"

            # A cancel sent to another process stops the turn: the model is still thinking
            # (it was asked: the cancel does not land before the call, leaving the step queued).
            # The four turns overflowed the window: their summaries are written first, so no
            # summarizer call takes the delay meant for the turn.
            await wait_until_settled(postgres, session_id)
            upstream.push(Delay(60))
            asked = len(upstream.requests)
            other = await new_session(a)
            body = {"session_id": other, "message": "think hard", "stream": True}
            events: list[tuple[str, dict[str, Any]]] = []
            async with a.stream("POST", "/api/chat/send", json=body) as response:
                async for name, data in read_events(response):
                    events.append((name, data))
                    if name == "turn.started":
                        await until(lambda: len(upstream.requests) > asked, "the model call")
                        cancel = await b.post(f"/api/chat/sessions/{other}/cancel")
            assert cancel.json() == {"cancelled": True}
            assert events[-1][0] == "error" and events[-1][1]["code"] == "cancelled"

            # A stream cut midway on one process resumes on another: every event once, in order.
            upstream.push(Text(LONG_REPLY, pause_s=0.02))
            body = {"session_id": await new_session(a), "message": "long please", "stream": True}
            seen = await cut_after(a, body, deltas=5)
            assert [name for _, name, _ in seen].count("text.delta") == 5, seen
            streamed = seen + await resume(b, seen[0][2]["turn_id"], seen[-1][0])
            assert [event_id for event_id, _, _ in streamed] == list(range(1, len(streamed) + 1))
            assert text_of(streamed) == LONG_REPLY and streamed[-1][1] == "turn.completed"

            # The doomed process dies (SIGKILL) right after a summary is written, before its
            # memory line; a live one resumes the job once the lease runs out, exactly once.
            async with httpx.AsyncClient(base_url=doomed.base_url, timeout=60) as c:
                third = await new_session(c)
                for number in range(8):
                    try:
                        await send(c, third, f"turn {number}")
                    except httpx.TransportError:
                        break
            assert doomed.wait_for_exit(60) == -signal.SIGKILL
            job = await wait_for_job_done(postgres, third)
            lines = await fetch(
                postgres,
                "SELECT id FROM memory_entries WHERE session_id = :s AND first_message_id = :f",
                s=third,
                f=job.first_message_id,
            )
            assert len(lines) == 1
        finally:
            for client in clients:
                await client.aclose()


async def wait_until_settled(postgres: str, session_id: str) -> None:
    """Until the summarizer has nothing left to ask the model about `session_id`: no unfinished
    job and the window within `max_history_messages`, so none is about to be planned."""
    last: list[Any] = []  # the last row read, for the failure's message

    async def settled() -> bool:
        (row,) = await fetch(
            postgres,
            "SELECT"
            " (SELECT count(*) FROM overflow_jobs WHERE session_id = :s AND status IN"
            " ('pending', 'summarized', 'memory_written')) AS unfinished,"
            " (SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id"
            "  WHERE s.id = :s AND m.id >= s.window_start_id) AS window",
            s=session_id,
        )
        last[:] = [row]
        return bool(row.unfinished == 0 and row.window <= MAX_HISTORY_MESSAGES)

    await until(
        settled,
        lambda: f"the summarizer to settle: {last}",
        timeout_s=RESUME_TIMEOUT_S,
        poll_s=0.05,
    )


async def wait_for_job_done(postgres: str, session_id: str) -> Any:
    """The session's first overflow job, once a live process has finished it."""
    last: list[Any] = []  # the last jobs read, for the failure's message

    async def done() -> Any:
        jobs = await fetch(
            postgres,
            "SELECT * FROM overflow_jobs WHERE session_id = :s ORDER BY id LIMIT 1",
            s=session_id,
        )
        last[:] = jobs
        return jobs[0] if jobs and jobs[0].status == "done" else None

    return await until(
        done,
        lambda: f"a live process finishing the dead one's summary: {last}",
        timeout_s=RESUME_TIMEOUT_S,
        poll_s=0.1,
    )


async def test_a_5_per_minute_limit_admits_exactly_5_across_three_processes(
    upstream: FakeOpenAIServer, postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    files = with_quota(shared_config(tmp_path, upstream, postgres, redis_url, redis_prefix), 5)
    with three(files) as processes:
        clients = [httpx.AsyncClient(base_url=p.base_url, timeout=60) for p in processes]
        try:
            answers = await asyncio.gather(  # each in a new session: every request counts once
                *(client.post("/api/chat/send", json={"message": "hi"}) for client in clients * 4)
            )
        finally:
            for client in clients:
                await client.aclose()
    assert sorted(a.status_code for a in answers) == [200] * 5 + [429] * 7
