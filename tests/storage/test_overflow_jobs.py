"""The summarizer journal: each step happens once, from the status before it, whoever tries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date

import pytest

from backend.domain.messages import UserInput
from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.migrate import migrate
from backend.storage.overflow_jobs import OverflowJobRepository
from backend.storage.sessions import SessionRepository
from backend.storage.usage import UsageDay

SUMMARY_USAGE = UsageDay("default", date(2026, 12, 3), summarizer_tokens=10, summarizer_calls=1)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(database_url)
    await migrate(db)
    yield db
    await db.dispose()


async def test_a_stale_worker_cannot_replay_a_finished_job(database: Database) -> None:
    sessions = SessionRepository(database)
    session = await sessions.create(tenant_id="default", channel="api")
    messages = MessageRepository(database)
    for i in range(4):
        await messages.add_user(
            tenant_id="default", session_id=session.id, turn_id=f"t{i}", user_input=UserInput("m")
        )
    jobs = OverflowJobRepository(database)
    job = await jobs.create(
        tenant_id="default",
        session_id=session.id,
        scope_key="",
        kind="overflow",
        first_message_id=1,
        last_message_id=2,
        next_start_id=3,
        memory_from_id=1,
        previous_summary="",
    )
    assert job is not None
    stale = job  # a second worker's copy, read while the job was pending
    assert await jobs.claim(tenant_id="default", job_id=job.id, lease_s=0)
    await jobs.record_summary(job, summary="first summary", memory_line="fact", usage=SUMMARY_USAGE)
    await jobs.record_memory(job, memory_entry_id="e1")
    await sessions.update(tenant_id="default", session_id=session.id, summary="by hand")
    await jobs.complete(job, delete_evicted=False)
    assert not await jobs.claim(tenant_id="default", job_id=job.id, lease_s=0)
    await jobs.record_summary(
        stale, summary="second summary", memory_line="fact", usage=SUMMARY_USAGE
    )
    await jobs.record_memory(stale, memory_entry_id="e2")
    await jobs.complete(stale, delete_evicted=False)
    done = await jobs.get(tenant_id="default", job_id=job.id)
    after = await sessions.get(tenant_id="default", session_id=session.id)
    assert (done.status, done.summary, done.memory_entry_id) == ("done", "first summary", "e1")
    assert after.summary == "by hand"  # a summary set during the job is not overwritten
    assert after.window_start_id == 3 and after.memory_watermark_id == 2
