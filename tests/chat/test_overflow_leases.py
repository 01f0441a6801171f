"""A summarizer job never stalls: a worker that died holding a job's lease loses it within
`memory.lease_s` (30 s by default, renewed while a job runs) on both backends, and a storage
fault during a job is waited out with backoff, after which the job finishes exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.domain.events import ProviderEvent
from backend.domain.requests import ChatRequest
from backend.memory.entries import parse_document
from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import overflow_jobs
from tests.conftest import fill, make_settings, serve
from tests.fakes.summarizer import EchoSummarizer
from tests.waiting import until

FIRST_TWO = "user said: fact number 0; user said: fact number 1"  # the first evicted turns


@dataclass
class GatedSummarizer(EchoSummarizer):
    """The echo summarizer, whose first answer waits for `gate` (never, unless a test opens
    it); `asked` is set when the first request arrived."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        if not self.asked.is_set():
            self.asked.set()
            await self.gate.wait()
        async for event in super().stream(request):
            yield event


def lease_settings(database_url: str, tmp_path: Path, **memory: Any) -> Any:
    return make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 4},
        memory={
            "path": str(tmp_path / "MEMORY.md"),
            "overflow_batch": 2,
            "retry_base_s": 0.05,
            **memory,
        },
    )


async def three_turns(client: Any) -> str:
    """A session whose window of 4 overflows: its first job starts."""
    session_id: str = (await client.post("/api/chat/sessions", json={})).json()["id"]
    for n in range(3):
        body = {"session_id": session_id, "message": f"fact number {n}"}
        assert (await client.post("/api/chat/send", json=body)).status_code == 200
    return session_id


async def jobs_of(app: Any) -> list[Any]:
    async with app.state.services.database.read() as conn:
        return list(await conn.execute(select(overflow_jobs).order_by(overflow_jobs.c.id)))


async def only_job_if(app: Any, holds: Callable[[Any], bool]) -> Any:
    """The app's one job when `holds(job)`, else None: a condition to wait `until`."""
    (job,) = await jobs_of(app)
    return job if holds(job) else None


@pytest.mark.slow
async def test_a_job_whose_worker_died_is_taken_over_when_its_lease_runs_out(
    database_url: str, tmp_path: Path
) -> None:
    settings = lease_settings(database_url, tmp_path, lease_s=1)
    stuck = GatedSummarizer()  # the worker that "dies" holding the job
    first = create_app(
        settings, provider=ScriptedProvider(replies=["ok"]), summarizer_provider=stuck
    )
    async with serve(first) as client:
        await three_turns(client)
        await until(stuck.asked.is_set, "the summarizer being asked")
        (held,) = await jobs_of(first)
    # Shutting down cancelled the job mid-call: its row is as a SIGKILL leaves it.
    assert held.status == "pending" and held.leased_until is not None

    summarizer = EchoSummarizer()
    second = create_app(
        settings, provider=ScriptedProvider(replies=["ok"]), summarizer_provider=summarizer
    )
    async with serve(second):  # its sweep finds the job once the dead one's lease ran out
        job = await until(
            lambda: only_job_if(second, lambda job: job.status == "done"),
            "the dead worker's job taken over and done",
            poll_s=0.1,
        )
        await second.state.services.runtimes.wait_idle()
    memory = parse_document((tmp_path / "MEMORY.md").read_text(encoding="utf-8"))
    assert job.status == "done" and summarizer.calls == 1
    assert [e.content for e in memory.entries] == [FIRST_TWO]


async def test_a_storage_fault_during_a_job_is_waited_out_and_the_job_finishes_once(
    small_disk: Path, tmp_path: Path
) -> None:
    settings = lease_settings(f"sqlite+aiosqlite:///{small_disk / 'tally.db'}", tmp_path)
    summarizer = GatedSummarizer()
    app = create_app(
        settings, provider=ScriptedProvider(replies=["ok"]), summarizer_provider=summarizer
    )
    database = None
    async with serve(app) as client:
        database = app.state.services.database
        await three_turns(client)
        await until(summarizer.asked.is_set, "the summarizer being asked")
        filler = fill(small_disk)
        summarizer.gate.set()  # its answer cannot be journaled: the disk is full
        await until(lambda: database.write_fault is not None, "the failed write")
        stalled = await jobs_of(app)
        filler.unlink()
        await app.state.services.runtimes.wait_idle()
        (job,) = await jobs_of(app)
    memory = parse_document((tmp_path / "MEMORY.md").read_text(encoding="utf-8"))
    assert stalled[0].status == "pending"  # nothing half-written meanwhile
    assert job.status == "done" and job.leased_until is None
    assert [e.content for e in memory.entries] == [FIRST_TWO]


async def test_a_running_jobs_lease_is_renewed_so_no_one_takes_it_over(
    database_url: str, tmp_path: Path
) -> None:
    summarizer = GatedSummarizer()  # a summary that takes longer than the lease
    app = create_app(
        lease_settings(database_url, tmp_path, lease_s=1),
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=summarizer,
    )
    async with serve(app) as client:
        await three_turns(client)
        await until(summarizer.asked.is_set, "the summarizer being asked")
        (claimed,) = await jobs_of(app)
        now = await until(
            lambda: only_job_if(app, lambda now: now.leased_until > claimed.leased_until),
            "the lease renewed",
        )
        summarizer.gate.set()
        await app.state.services.runtimes.wait_idle()
        (job,) = await jobs_of(app)
    assert now.leased_until > claimed.leased_until, "the lease was never renewed"
    assert job.status == "done" and summarizer.calls == 1
