"""Revert a memory line a summarizer wrote: the line goes, and its turns either return to the
window (the session's latest eviction, nothing distilled after it) or are distilled again from
the stored messages, right away. Either way each turn stays in memory at most once."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from backend.errors import Conflict
from backend.memory.base import MemoryEntryNotFound, MemoryStore
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import OverflowJobRepository
from backend.storage.sessions import SessionRepository

SUMMARIZER_WRITERS = ("auto-overflow", "auto-summary", "auto-raw")


@dataclass(frozen=True, slots=True)
class Reverted:
    session_id: str
    is_returned_to_window: bool  # else: distilled again (the caller starts it)


async def revert_line(
    *,
    tenant_id: str,
    scope_key: str,
    entry_id: str,
    memory: MemoryStore,
    jobs: OverflowJobRepository,
    messages: MessageRepository,
    sessions: SessionRepository,
) -> Reverted:
    """Revert memory entry `entry_id`, written by the overflow summarizer or the automatic
    memory write, while its messages are still stored (`memory.delete_evicted: false`)."""
    document = await memory.read(tenant_id=tenant_id, scope_key=scope_key)
    entry = next((e for e in document.entries if e.id == entry_id), None)
    if entry is None:
        raise MemoryEntryNotFound(entry_id)
    provenance = entry.provenance
    if provenance is None or entry.writer not in SUMMARIZER_WRITERS:
        raise Conflict(
            "only entries a summarizer wrote can be reverted; delete this one instead",
            code="not_revertible",
        )
    job = await jobs.done_for_line(
        tenant_id=tenant_id,
        session_id=provenance.session_id,
        memory_from_id=provenance.first_message_id,
        last_message_id=provenance.last_message_id,
    )
    if job is None:
        raise Conflict("this summary is no longer on record", code="not_revertible")
    distilled = await messages.between(
        tenant_id=tenant_id,
        session_id=job.session_id,
        first_id=job.memory_from_id,
        last_id=job.last_message_id,
    )
    if not distilled:
        raise Conflict("the summarized messages were deleted", code="turns_deleted")
    session = await sessions.get(tenant_id=tenant_id, session_id=job.session_id)
    is_latest_eviction = (
        job.kind == "overflow"
        and session.window_start_id == job.next_start_id
        and session.memory_watermark_id == job.last_message_id
    )
    if is_latest_eviction:
        # The line goes first: if the window could not be given back (the session moved on
        # meanwhile), the range is distilled again; a crash in between leaves the turns
        # archived and unreferenced, never summarized twice.
        await memory.delete(tenant_id=tenant_id, scope_key=scope_key, entry_id=entry_id)
        if await jobs.revert(job):
            return Reverted(job.session_id, is_returned_to_window=True)
    # Distill the range again: the job deletes this line before it writes the new one, so the
    # order of that and the delete below does not matter.
    if not await jobs.redo(job, replacing=entry_id):
        raise Conflict("this entry is being reverted already", code="revert_in_progress")
    with contextlib.suppress(MemoryEntryNotFound):
        await memory.delete(tenant_id=tenant_id, scope_key=scope_key, entry_id=entry_id)
    return Reverted(job.session_id, is_returned_to_window=False)
