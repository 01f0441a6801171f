"""Revert one compaction: its memory line goes, its turns come back into the window."""

from __future__ import annotations

from backend.errors import Conflict
from backend.memory.base import MemoryEntryNotFound, MemoryStore
from backend.memory.entries import NewEntry
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import OverflowJobRepository


async def revert_compaction(
    *,
    tenant_id: str,
    scope_key: str,
    entry_id: str,
    memory: MemoryStore,
    jobs: OverflowJobRepository,
    messages: MessageRepository,
) -> str:
    """Revert the compaction that wrote memory entry `entry_id`; return its session id.

    Only the session's latest compaction can be reverted (later ones summarized on top of it),
    and only while its messages are still stored (`memory.delete_evicted: false`).
    """
    document = await memory.read(tenant_id=tenant_id, scope_key=scope_key)
    entry = next((e for e in document.entries if e.id == entry_id), None)
    if entry is None:
        raise MemoryEntryNotFound(entry_id)
    provenance = entry.provenance
    if provenance is None or entry.source_kind != "auto-overflow":
        raise Conflict(
            "only entries written by the overflow summarizer can be reverted", code="not_revertible"
        )
    job = await jobs.done_for_range(
        tenant_id=tenant_id,
        session_id=provenance.session_id,
        last_message_id=provenance.last_message_id,
    )
    if job is None:
        raise Conflict("this compaction is no longer on record", code="not_revertible")
    evicted = await messages.between(
        tenant_id=tenant_id,
        session_id=job.session_id,
        first_id=job.first_message_id,
        last_id=job.last_message_id,
    )
    if not evicted:
        raise Conflict("the compacted messages were deleted", code="turns_deleted")
    # The line goes first: if the window could not be given back, the line is put back (a
    # crash in between leaves the turns archived and unreferenced, never summarized twice).
    await memory.delete(tenant_id=tenant_id, scope_key=scope_key, entry_id=entry_id)
    if not await jobs.revert(job):
        restored = NewEntry(entry.source_kind, entry.content, entry.date, provenance)
        await memory.append_once(tenant_id=tenant_id, scope_key=scope_key, entry=restored)
        raise Conflict(
            "a later compaction or memory write builds on this one; revert that first",
            code="not_latest_compaction",
        )
    return job.session_id
