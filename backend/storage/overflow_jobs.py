"""The summarizer's journal: one row per range, advanced one idempotent step at a time.

pending -> summarized (summary and memory line saved) -> memory_written -> done. A crash at
any point resumes from the saved status; the final step moves the window and the memory
watermark in one transaction, and only forward. The summarizer's words (summary, memory line,
its error) are made storable (`domain/text.py`), written and read alike on every backend.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.exc import IntegrityError

from backend.domain.text import storable_text
from backend.storage.database import Database
from backend.storage.notices import Deleted
from backend.storage.overflow_job_rows import (
    ACTIVE,
    JobKind,
    OverflowJob,
    job_from_row,
    storable_or_none,
)
from backend.storage.tables import messages, overflow_jobs, sessions
from backend.storage.timestamps import aware
from backend.storage.usage import UsageDay, add_usage

__all__ = ["ACTIVE", "JobKind", "OverflowJob", "OverflowJobRepository"]


class OverflowJobRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def create(
        self,
        *,
        tenant_id: str,
        session_id: str,
        scope_key: str,
        kind: JobKind,
        first_message_id: int,
        last_message_id: int,
        next_start_id: int,
        memory_from_id: int,
        previous_summary: str,
        origin: str | None = None,
    ) -> OverflowJob | None:
        """Journal a range; None when that range is already journaled."""
        now = datetime.now(UTC)
        try:
            async with self._db.write() as conn:
                result = await conn.execute(
                    overflow_jobs.insert().values(
                        tenant_id=tenant_id,
                        session_id=session_id,
                        scope_key=scope_key,
                        kind=kind,
                        first_message_id=first_message_id,
                        last_message_id=last_message_id,
                        next_start_id=next_start_id,
                        memory_from_id=memory_from_id,
                        status="pending",
                        previous_summary=previous_summary,
                        origin=origin,
                        attempts=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
                (job_id,) = result.inserted_primary_key or (0,)
        except IntegrityError:
            return None
        return await self.get(tenant_id=tenant_id, job_id=int(job_id))

    async def get(self, *, tenant_id: str, job_id: int) -> OverflowJob:
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(overflow_jobs).where(
                        overflow_jobs.c.tenant_id == tenant_id, overflow_jobs.c.id == job_id
                    )
                )
            ).one()
            return job_from_row(row)

    async def active(self, *, tenant_id: str, session_id: str) -> list[OverflowJob]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(overflow_jobs)
                .where(
                    overflow_jobs.c.tenant_id == tenant_id,
                    overflow_jobs.c.session_id == session_id,
                    overflow_jobs.c.status.in_(ACTIVE),
                )
                .order_by(overflow_jobs.c.id)
            )
            return [job_from_row(row) for row in rows]

    async def failing(self, *, limit: int = 100) -> list[OverflowJob]:
        """Unfinished jobs whose latest attempt failed, oldest first: memory is degraded there."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(overflow_jobs)
                .where(overflow_jobs.c.status.in_(ACTIVE), overflow_jobs.c.attempts > 0)
                .order_by(overflow_jobs.c.id)
                .limit(limit)
            )
            return [job_from_row(row) for row in rows]

    async def last_done(self) -> dict[str, datetime]:
        """Each tenant's latest finished summary (its memory's last compaction): the
        operator's console, which reads every tenant."""
        latest = func.max(overflow_jobs.c.updated_at)
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(overflow_jobs.c.tenant_id, latest.label("at"))
                .where(overflow_jobs.c.status == "done")
                .group_by(overflow_jobs.c.tenant_id)
            )
            return {row.tenant_id: aware(row.at) for row in rows}

    async def sessions_with_active_jobs(self, *, unleased: bool = False) -> list[tuple[str, str]]:
        """(tenant_id, session_id) of every unfinished job: the start-up resume list; with
        `unleased`, only the jobs no live worker holds (a dead worker's lease ran out).

        The one read that crosses tenants, on purpose: it belongs to the operator's process.
        """
        query = select(overflow_jobs.c.tenant_id, overflow_jobs.c.session_id).where(
            overflow_jobs.c.status.in_(ACTIVE)
        )
        if unleased:
            lease = overflow_jobs.c.leased_until
            query = query.where(lease.is_(None) | (lease < datetime.now(UTC)))
        async with self._db.read() as conn:
            rows = await conn.execute(query.distinct())
            return [(row.tenant_id, row.session_id) for row in rows]

    async def claim(self, *, tenant_id: str, job_id: int, lease_s: float) -> bool:
        """Lease an unfinished job to this worker; False while another worker's lease runs or
        once the job is finished."""
        now = datetime.now(UTC)
        async with self._db.write() as conn:
            result = await conn.execute(
                update(overflow_jobs)
                .where(
                    overflow_jobs.c.tenant_id == tenant_id,
                    overflow_jobs.c.id == job_id,
                    overflow_jobs.c.status.in_(ACTIVE),
                    (overflow_jobs.c.leased_until.is_(None)) | (overflow_jobs.c.leased_until < now),
                )
                .values(leased_until=now + timedelta(seconds=lease_s))
            )
            return result.rowcount == 1

    async def renew(self, *, tenant_id: str, job_id: int, lease_s: float) -> None:
        """Extend the lease of a job this worker runs (its heartbeat)."""
        await self._set(
            tenant_id, job_id, leased_until=datetime.now(UTC) + timedelta(seconds=lease_s)
        )

    async def _move(self, job: OverflowJob, from_status: str, **values: object) -> bool:
        """Set `values` on the job if it is still at `from_status` (a stale copy changes
        nothing); whether it was."""
        async with self._db.write() as conn:
            result = await conn.execute(
                update(overflow_jobs)
                .where(
                    overflow_jobs.c.tenant_id == job.tenant_id,
                    overflow_jobs.c.id == job.id,
                    overflow_jobs.c.status == from_status,
                )
                .values(**values, updated_at=datetime.now(UTC))
            )
            return result.rowcount == 1

    async def release(self, *, tenant_id: str, job_id: int) -> None:
        """Free a job's lease, so the next attempt (here or elsewhere) can claim it at once."""
        await self._set(tenant_id, job_id, leased_until=None)

    async def release_leases(self) -> None:
        """Free every lease: at start-up of the only process (SQLite), any lease belongs to a
        process that is gone."""
        async with self._db.write() as conn:
            await conn.execute(
                update(overflow_jobs)
                .where(overflow_jobs.c.status.in_(ACTIVE))
                .values(leased_until=None)
            )

    async def _set(self, tenant_id: str, job_id: int, **values: object) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                update(overflow_jobs)
                .where(overflow_jobs.c.tenant_id == tenant_id, overflow_jobs.c.id == job_id)
                .values(**values, updated_at=datetime.now(UTC))
            )

    async def record_summary(
        self,
        job: OverflowJob,
        *,
        summary: str,
        memory_line: str | None,
        usage: UsageDay,
        supersedes: tuple[str, ...] = (),
    ) -> None:
        """Save the summary and charge its `usage` to the tenant, in one transaction."""
        async with self._db.write() as conn:
            saved = await conn.execute(
                update(overflow_jobs)
                .where(
                    overflow_jobs.c.tenant_id == job.tenant_id,
                    overflow_jobs.c.id == job.id,
                    overflow_jobs.c.status == "pending",  # a stale worker's copy changes nothing
                )
                .values(
                    status="summarized",
                    summary=storable_text(summary),
                    memory_line=storable_or_none(memory_line),
                    memory_supersedes=",".join(supersedes) or None,
                    updated_at=datetime.now(UTC),
                )
            )
            if saved.rowcount == 1:
                await conn.run_sync(add_usage, usage)

    async def record_failure(self, job: OverflowJob, *, error: str, retry_at: datetime) -> None:
        await self._set(
            job.tenant_id,
            job.id,
            attempts=job.attempts + 1,
            last_error=storable_text(error[:2000]),
            next_attempt_at=retry_at,
            leased_until=None,
        )

    async def record_memory(self, job: OverflowJob, *, memory_entry_id: str | None) -> None:
        await self._move(
            job, "summarized", status="memory_written", memory_entry_id=memory_entry_id
        )

    async def abandon(self, job: OverflowJob, *, reason: str) -> None:
        await self._set(job.tenant_id, job.id, status="abandoned", last_error=storable_text(reason))

    async def complete(self, job: OverflowJob, *, delete_evicted: bool) -> None:
        """Close the job and move the window and the watermark forward (never back), in one
        transaction; a summary set by hand meanwhile is kept. A stale copy changes nothing."""
        owned = (sessions.c.tenant_id == job.tenant_id) & (sessions.c.id == job.session_id)
        values: dict[str, object] = {
            "memory_watermark_id": case(
                (sessions.c.memory_watermark_id < job.last_message_id, job.last_message_id),
                else_=sessions.c.memory_watermark_id,
            )
        }
        if job.kind == "overflow":
            values["window_start_id"] = case(
                (sessions.c.window_start_id < job.next_start_id, job.next_start_id),
                else_=sessions.c.window_start_id,
            )
            values["summary"] = case(
                (sessions.c.summary == job.previous_summary, job.summary or job.previous_summary),
                else_=sessions.c.summary,
            )
        async with self._db.write() as conn:
            closed = await conn.execute(
                update(overflow_jobs)
                .where(
                    overflow_jobs.c.tenant_id == job.tenant_id,
                    overflow_jobs.c.id == job.id,
                    overflow_jobs.c.status == "memory_written",
                )
                .values(status="done", leased_until=None, updated_at=datetime.now(UTC))
            )
            if closed.rowcount != 1:
                return
            await conn.execute(update(sessions).where(owned).values(**values))
            is_deleting = delete_evicted and job.kind == "overflow"
            if is_deleting:
                await conn.execute(
                    delete(messages).where(
                        messages.c.tenant_id == job.tenant_id,
                        messages.c.session_id == job.session_id,
                        messages.c.id.between(job.first_message_id, job.last_message_id),
                    )
                )
        if is_deleting:
            deleted = Deleted(
                job.tenant_id, job.session_id, job.first_message_id, job.last_message_id
            )
            self._db.notices.deleted(deleted)

    async def pass_over(self, *, tenant_id: str, session_id: str, through_id: int) -> None:
        """Move the session's watermark to `through_id` (never back) with no job: a leftover
        judged to hold nothing for memory (chat/leftovers.py) is not distilled again."""
        async with self._db.write() as conn:
            await conn.execute(
                update(sessions)
                .where(
                    sessions.c.tenant_id == tenant_id,
                    sessions.c.id == session_id,
                    sessions.c.memory_watermark_id < through_id,
                )
                .values(memory_watermark_id=through_id)
            )

    async def summary_covering(
        self, *, tenant_id: str, session_id: str, last_message_id: int
    ) -> str | None:
        """The summary of the session's newest finished job that summarized past
        `last_message_id` (an automatic write's summary, made with its memory line): an
        eviction of what it distilled takes it instead of calling the model again."""
        async with self._db.read() as conn:
            return await conn.scalar(
                select(overflow_jobs.c.summary)
                .where(
                    overflow_jobs.c.tenant_id == tenant_id,
                    overflow_jobs.c.session_id == session_id,
                    overflow_jobs.c.status == "done",
                    overflow_jobs.c.summary.is_not(None),
                    overflow_jobs.c.last_message_id >= last_message_id,
                )
                .order_by(overflow_jobs.c.id.desc())
                .limit(1)
            )

    async def done_for_line(
        self, *, tenant_id: str, session_id: str, memory_from_id: int, last_message_id: int
    ) -> OverflowJob | None:
        """The completed job (either kind) that distilled this range into a memory line."""
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(overflow_jobs).where(
                        overflow_jobs.c.tenant_id == tenant_id,
                        overflow_jobs.c.session_id == session_id,
                        overflow_jobs.c.status == "done",
                        overflow_jobs.c.memory_from_id == memory_from_id,
                        overflow_jobs.c.last_message_id == last_message_id,
                    )
                )
            ).first()
            return job_from_row(row) if row is not None else None

    async def redo(self, job: OverflowJob, *, replacing: str) -> bool:
        """Make a completed job pending again, to distill its range once more. Its memory step
        deletes the line `replacing` before it writes the new one, so the range has at most
        one line at every step (crashes included). Completing it again changes no window,
        watermark or summary: those only move forward, and the session moved on.
        False when the job is not done (another revert got there first)."""
        return await self._move(
            job,
            "done",
            status="pending",
            memory_line=None,
            memory_supersedes=None,
            memory_entry_id=replacing,
            attempts=0,
            next_attempt_at=None,
            leased_until=None,
            last_error=None,
        )

    async def revert(self, job: OverflowJob) -> bool:
        """Undo a completed overflow: its messages return to the window, the summary and the
        watermark go back, and the job is forgotten so the range can be summarized again.
        False when the session moved on (a later compaction, or the window changed)."""
        if job.kind != "overflow":
            return False
        async with self._db.write() as conn:
            result = await conn.execute(
                update(sessions)
                .where(
                    sessions.c.tenant_id == job.tenant_id,
                    sessions.c.id == job.session_id,
                    sessions.c.window_start_id == job.next_start_id,
                    sessions.c.memory_watermark_id == job.last_message_id,
                )
                .values(
                    window_start_id=job.first_message_id,
                    summary=job.previous_summary,
                    memory_watermark_id=job.memory_from_id - 1,
                    updated_at=datetime.now(UTC),
                )
            )
            if result.rowcount != 1:
                return False
            await conn.execute(
                delete(overflow_jobs).where(
                    overflow_jobs.c.tenant_id == job.tenant_id, overflow_jobs.c.id == job.id
                )
            )
            return True
