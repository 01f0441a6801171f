"""Confirm before remember (`memory.confirm_writes`): a line about a person, from the
`memory_write` tool or from an overflow summary, is proposed to that person instead of written.
Until they approve it, it is in no memory and so in no prompt; discarded or expired, it never
is. An approved line is written as it would have been (a summary's with its range, so the
range is still distilled once), dated the day it was said, into the memory of the person the
identity belongs to at that moment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from backend.domain.clock import utc_now
from backend.memory.base import MemoryUnavailable
from backend.memory.entries import NewEntry, Provenance, compose_source, split_supersedes
from backend.memory.linked_scopes import PersonalMemory
from backend.storage.pending_memory import PendingMemoryRepository, Proposal, ProposalNotFound

log = logging.getLogger(__name__)


class MemoryProposals:
    def __init__(
        self,
        proposals: PendingMemoryRepository,
        memory: PersonalMemory,
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._proposals = proposals
        self._memory = memory
        self._identities = memory.identities
        self._clock = clock

    async def propose(
        self,
        *,
        tenant_id: str,
        user_key: str,
        session_id: str,
        entry: NewEntry,
        expire_s: float,
        job_id: int | None = None,
    ) -> Proposal:
        """Propose `entry`; `job_id`, the overflow job proposing it (once per job)."""
        now = self._clock()
        provenance = entry.provenance
        return await self._proposals.propose(
            tenant_id=tenant_id,
            user_key=user_key,
            session_id=session_id,
            source=compose_source(entry.source, None, entry.supersedes),
            content=entry.content,
            message_range=None
            if provenance is None
            else (provenance.first_message_id, provenance.last_message_id),
            job_id=job_id,
            now=now,
            expires_at=now + timedelta(seconds=expire_s),
        )

    async def pending(self, *, tenant_id: str, user_key: str) -> list[Proposal]:
        """What waits for an answer from the person `user_key` is (from any of their
        identities)."""
        return await self._proposals.pending(
            tenant_id=tenant_id,
            user_keys=await self._person(tenant_id, user_key),
            now=self._clock(),
        )

    async def to_ask(self, *, tenant_id: str, user_key: str) -> list[Proposal]:
        """`user_key`'s proposals no chat has asked about yet; each is asked once."""
        return await self._proposals.unannounced(
            tenant_id=tenant_id, user_key=user_key, now=self._clock()
        )

    async def decide(
        self, *, tenant_id: str, proposal_id: str, approve: bool, user_key: str | None = None
    ) -> Proposal:
        """Approve (and write) or discard a proposal. With `user_key` (an answer in a chat),
        only a proposal to that person: any other is ProposalNotFound."""
        if user_key is not None:
            found = await self._proposals.get(tenant_id=tenant_id, proposal_id=proposal_id)
            if found.user_key not in await self._person(tenant_id, user_key):
                raise ProposalNotFound(proposal_id)
        decided = await self._proposals.decide(
            tenant_id=tenant_id, proposal_id=proposal_id, approve=approve, now=self._clock()
        )
        if approve:
            try:
                await self._write(decided)
            except MemoryUnavailable:
                await self._proposals.reopen(decided, now=self._clock())  # answered again
                raise
        return decided

    async def finish_approved(self) -> int:
        """Write the lines approved before a crash stopped their writing; how many. One that
        memory cannot take now stays approved, for the next start."""
        written = 0
        for proposal in await self._proposals.approved_unwritten():
            try:
                await self._write(proposal)
            except MemoryUnavailable as exc:
                log.warning("an approved memory line waits for memory: %s", exc.message)
                continue
            written += 1
        return written

    async def _write(self, proposal: Proposal) -> None:
        kind, supersedes = split_supersedes(proposal.source)
        first, last = proposal.first_message_id, proposal.last_message_id
        provenance = None
        if first is not None and last is not None:
            provenance = Provenance(proposal.session_id, first, last)
        entry = NewEntry(kind, proposal.content, proposal.date, provenance, supersedes)
        scope = {"tenant_id": proposal.tenant_id, "scope_key": proposal.user_key}
        if entry.provenance is None:
            await self._memory.append(**scope, entries=[entry])
        else:  # a crash after the write and before `written`: not written twice
            await self._memory.append_once(**scope, entry=entry)
        await self._proposals.mark_written(proposal, now=self._clock())

    async def _person(self, tenant_id: str, user_key: str) -> list[str]:
        """The identities of the person `user_key` is (itself alone, when not linked)."""
        person = await self._identities.person(tenant_id=tenant_id, user_key=user_key)
        return [user_key] if person is None else person.identities


@dataclass(frozen=True, slots=True)
class Confirmation:
    """A tenant's `memory.confirm_writes`: where lines about a person go instead of memory."""

    proposals: MemoryProposals
    expire_s: float

    async def propose(
        self,
        *,
        tenant_id: str,
        user_key: str,
        session_id: str,
        entry: NewEntry,
        job_id: int | None = None,
    ) -> Proposal:
        proposal = await self.proposals.propose(
            tenant_id=tenant_id,
            user_key=user_key,
            session_id=session_id,
            entry=entry,
            expire_s=self.expire_s,
            job_id=job_id,
        )
        log.info("memory line proposed", extra={"tenant": tenant_id, "session": session_id})
        return proposal
