"""The MemoryStore protocol, its errors, and the checks every store applies to its keys.

A store keeps one MEMORY.md per (tenant_id, scope_key): scope_key "" is the whole tenant, and
with `memory.scope: user` the caller passes the end user's key. Both are required keywords on
every method, so no call can reach another tenant's memory by omission.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from backend.domain.tenants import TENANT_ID
from backend.errors import InvalidInput, NotFound, TallyError
from backend.memory.entries import MemoryDocument, MemoryEntry, NewEntry, Provenance

MAX_SCOPE_KEY_LENGTH = 200  # the `memory_entries.scope_key` column


class MemoryEntryNotFound(NotFound):
    code = "memory_entry_not_found"

    def __init__(self, entry_id: str) -> None:
        super().__init__(f"memory entry {entry_id!r} does not exist")


class MemoryUnavailable(TallyError):
    """The memory store cannot be read or written right now (I/O error, lock held too long)."""

    code = "memory_unavailable"
    status = 503


class MemoryWriteFailed(MemoryUnavailable):
    """A write did not happen: the stored memory is exactly as it was before the call."""

    code = "memory_write_failed"


def check_scope(tenant_id: str, scope_key: str) -> None:
    """Raise InvalidInput unless `tenant_id` is a slug and `scope_key` a printable key that fits.

    Both stores apply the same check, so a key one store accepts the other accepts too.
    """
    if not TENANT_ID.fullmatch(tenant_id):
        raise InvalidInput(f"tenant id {tenant_id!r} is not a valid slug")
    if len(scope_key) > MAX_SCOPE_KEY_LENGTH or not scope_key.isprintable():
        raise InvalidInput(
            f"a memory scope key must be 0 to {MAX_SCOPE_KEY_LENGTH} printable characters"
        )


def check_limit(limit: int) -> None:
    if limit < 0:
        raise InvalidInput("limit must not be negative")


class MemoryStore(Protocol):
    """Long-term memory, one MEMORY.md per (tenant_id, scope_key).

    Invariants: a write is atomic (all of it or none of it); a failed write raises
    MemoryWriteFailed and changes nothing; entry content is always neutralised (one line);
    lines that are not entries are never dropped; entry ids are stable and opaque.
    """

    async def read(self, *, tenant_id: str, scope_key: str) -> MemoryDocument:
        """The whole document: `.content` (MEMORY.md text), `.entries`, `.invalid_lines`."""
        ...

    async def append(
        self, *, tenant_id: str, scope_key: str, entries: Sequence[NewEntry]
    ) -> list[MemoryEntry]:
        """Append `entries` in order, all or none; return them as stored."""
        ...

    async def append_once(self, *, tenant_id: str, scope_key: str, entry: NewEntry) -> MemoryEntry:
        """Append `entry` unless an entry with the same provenance exists; return the one stored.

        The check and the write are one atomic step, so a summarizer retried after a crash
        covers each message range with exactly one entry. `entry.provenance` is required.
        """
        ...

    async def delete(self, *, tenant_id: str, scope_key: str, entry_id: str) -> None:
        """Remove one entry; MemoryEntryNotFound if this scope has no entry with that id."""
        ...

    async def replace(self, *, tenant_id: str, scope_key: str, content: str) -> MemoryDocument:
        """Replace the whole text (PUT /api/memory). Entries are re-formatted with neutralised
        fields; comments and invalid lines are kept verbatim and reported."""
        ...

    async def search(
        self, *, tenant_id: str, scope_key: str, query: str, limit: int
    ) -> list[MemoryEntry]:
        """At most `limit` entries matching terms of `query`, best first (see rank_entries)."""
        ...

    async def recent(self, *, tenant_id: str, scope_key: str, limit: int) -> list[MemoryEntry]:
        """The last `limit` entries of the document, in document (oldest first) order."""
        ...


def require_provenance(entry: NewEntry) -> Provenance:
    if entry.provenance is None:
        raise InvalidInput("append_once needs an entry with provenance")
    return entry.provenance
