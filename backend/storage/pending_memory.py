"""Memory lines proposed to a person and their answers (`memory.confirm_writes`).

A proposal is `pending` until its person approves it, discards it, or lets it expire. An
approval is claimed in one statement (a second answer, here or in another process, finds it
decided) and marked `written` once the line is in memory: one approved but not written was
interrupted, and is written at the next start. A summarizer's proposal is unique per overflow
job, so a summary retried after a crash proposes its line once. A line comes from the model:
it is made storable (`domain/text.py`) on the way in and out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Row, select, update
from sqlalchemy.exc import IntegrityError

from backend.domain.text import storable_text
from backend.errors import Conflict, NotFound, TallyError
from backend.storage.database import Database
from backend.storage.tables import pending_memory
from backend.storage.timestamps import aware

Status = Literal["pending", "approved", "discarded", "expired"]


class ProposalNotFound(NotFound):
    code = "proposal_not_found"

    def __init__(self, proposal_id: str) -> None:
        super().__init__(f"proposed memory line {proposal_id!r} does not exist")


class ProposalDecided(Conflict):
    code = "proposal_decided"

    def __init__(self, status: str) -> None:
        super().__init__(f"this proposed memory line was {status} already")


class ProposalExpired(TallyError):
    code = "proposal_expired"
    status = 410

    def __init__(self) -> None:
        super().__init__("this proposed memory line expired unanswered: it will not be kept")


@dataclass(frozen=True, slots=True)
class Proposal:
    id: str
    tenant_id: str
    user_key: str
    session_id: str
    source: str
    content: str
    first_message_id: int | None
    last_message_id: int | None
    status: Status
    created_at: datetime
    expires_at: datetime

    @property
    def date(self) -> dt.date:
        """The day it was said: the line is dated so, whenever it is approved."""
        return self.created_at.date()


def _proposal(row: Row[Any]) -> Proposal:
    return Proposal(
        id=str(row.id),
        tenant_id=row.tenant_id,
        user_key=row.user_key,
        session_id=row.session_id,
        source=storable_text(row.source),
        content=storable_text(row.content),
        first_message_id=row.first_message_id,
        last_message_id=row.last_message_id,
        status=row.status,
        created_at=aware(row.created_at),
        expires_at=aware(row.expires_at),
    )


def _row_id(proposal_id: str) -> int | None:
    is_number = proposal_id.isascii() and proposal_id.isdigit() and len(proposal_id) < 18
    return int(proposal_id) if is_number else None


class PendingMemoryRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def propose(
        self,
        *,
        tenant_id: str,
        user_key: str,
        session_id: str,
        source: str,
        content: str,
        message_range: tuple[int, int] | None,
        job_id: int | None,
        now: datetime,
        expires_at: datetime,
    ) -> Proposal:
        """Keep a proposal; for a job that proposed before (retried after a crash), that one."""
        first, last = message_range or (None, None)
        values = {
            "tenant_id": tenant_id,
            "user_key": user_key,
            "session_id": session_id,
            "job_id": job_id,
            "source": storable_text(source),
            "content": storable_text(content),
            "first_message_id": first,
            "last_message_id": last,
            "status": "pending",
            "created_at": now,
            "expires_at": expires_at,
        }
        try:
            async with self._db.write() as conn:
                result = await conn.execute(pending_memory.insert().values(**values))
                (new_id,) = result.inserted_primary_key or (None,)
                row = (
                    await conn.execute(select(pending_memory).where(pending_memory.c.id == new_id))
                ).one()
        except IntegrityError:  # this job's line was proposed already
            async with self._db.read() as conn:
                row = (
                    await conn.execute(
                        select(pending_memory).where(
                            pending_memory.c.tenant_id == tenant_id,
                            pending_memory.c.job_id == job_id,
                        )
                    )
                ).one()
        return _proposal(row)

    async def get(self, *, tenant_id: str, proposal_id: str) -> Proposal:
        row_id = _row_id(proposal_id)
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(pending_memory).where(
                        pending_memory.c.tenant_id == tenant_id, pending_memory.c.id == row_id
                    )
                )
            ).first()
        if row is None:
            raise ProposalNotFound(proposal_id)
        return _proposal(row)

    async def pending(
        self, *, tenant_id: str, user_keys: Sequence[str], now: datetime
    ) -> list[Proposal]:
        """The proposals still waiting for an answer from any of `user_keys`, oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(pending_memory)
                .where(
                    pending_memory.c.tenant_id == tenant_id,
                    pending_memory.c.user_key.in_(list(user_keys)),
                    pending_memory.c.status == "pending",
                    pending_memory.c.expires_at > now,
                )
                .order_by(pending_memory.c.id)
            )
            return [_proposal(row) for row in rows]

    async def decide(
        self, *, tenant_id: str, proposal_id: str, approve: bool, now: datetime
    ) -> Proposal:
        """Approve or discard a pending proposal, once; ProposalExpired past its time (and it
        is marked so), ProposalDecided when it was answered already."""
        found = await self.get(tenant_id=tenant_id, proposal_id=proposal_id)
        mine = (pending_memory.c.tenant_id == tenant_id, pending_memory.c.id == int(found.id))
        waiting = pending_memory.c.status == "pending"
        is_late = found.status == "pending" and found.expires_at <= now
        status: Status = "expired" if is_late else "approved" if approve else "discarded"
        async with self._db.write() as conn:
            claimed = await conn.execute(
                update(pending_memory).where(*mine, waiting).values(status=status, decided_at=now)
            )
        if is_late:
            raise ProposalExpired()
        if claimed.rowcount != 1:
            latest = await self.get(tenant_id=tenant_id, proposal_id=proposal_id)
            if latest.status == "expired":
                raise ProposalExpired()
            raise ProposalDecided(latest.status)
        return dataclasses.replace(found, status=status)  # what was claimed: no read again

    async def reopen(self, proposal: Proposal, *, now: datetime) -> None:
        """An approval whose line could not be written waits for an answer again: asked
        again, with its whole time to answer from now."""
        async with self._db.write() as conn:
            await conn.execute(
                update(pending_memory)
                .where(
                    pending_memory.c.tenant_id == proposal.tenant_id,
                    pending_memory.c.id == int(proposal.id),
                    pending_memory.c.status == "approved",
                )
                .values(
                    status="pending",
                    decided_at=None,
                    announced_at=None,
                    expires_at=now + (proposal.expires_at - proposal.created_at),
                )
            )

    async def mark_written(self, proposal: Proposal, *, now: datetime) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                update(pending_memory)
                .where(
                    pending_memory.c.tenant_id == proposal.tenant_id,
                    pending_memory.c.id == int(proposal.id),
                )
                .values(written_at=now)
            )

    async def approved_unwritten(self) -> list[Proposal]:
        """Approvals a crash interrupted before their line was written, every tenant's."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(pending_memory)
                .where(pending_memory.c.status == "approved", pending_memory.c.written_at.is_(None))
                .order_by(pending_memory.c.id)
            )
            return [_proposal(row) for row in rows]

    async def unannounced(self, *, tenant_id: str, user_key: str, now: datetime) -> list[Proposal]:
        """`user_key`'s pending proposals not yet asked in a chat, each now marked asked (a
        chat asks each once)."""
        found = await self.pending(tenant_id=tenant_id, user_keys=[user_key], now=now)
        if not found:  # the common case, every bot turn: no write transaction
            return []
        asked: list[Proposal] = []
        async with self._db.write() as conn:
            for proposal in found:
                claimed = await conn.execute(
                    update(pending_memory)
                    .where(
                        pending_memory.c.tenant_id == tenant_id,
                        pending_memory.c.id == int(proposal.id),
                        pending_memory.c.announced_at.is_(None),
                    )
                    .values(announced_at=now)
                )
                if claimed.rowcount == 1:
                    asked.append(proposal)
        return asked
