"""Memory keyed by the person, not by the identity: a MemoryStore that reads and writes the
memory of `person:<id>` for every identity linked to that person, and an identity's own
otherwise. Every caller (the prompt, the memory tools, the summarizer, the bots' commands, the
memory API) passes the end user's key as before and meets the same memory on every channel.

The person is looked up on every call, never cached: a link made in one process is obeyed by
the next call in any other. The tenant's scope ("") has no person and costs no lookup.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from backend.memory.base import MemoryEntryNotFound, MemoryStore
from backend.memory.entries import MemoryDocument, MemoryEntry, NewEntry
from backend.storage.identities import IdentityRepository, person_scope


class PersonalMemory:
    """MemoryStore over `store`, with each identity's scope key replaced by its person's."""

    def __init__(self, store: MemoryStore, identities: IdentityRepository) -> None:
        self.store = store  # scopes as stored: what moving memory between them needs
        self.identities = identities  # who is which person: linking reads and writes it

    async def scope_of(self, *, tenant_id: str, scope_key: str) -> str:
        if not scope_key:
            return scope_key
        person = await self.identities.person_of(tenant_id=tenant_id, user_key=scope_key)
        return scope_key if person is None else person_scope(person)

    async def members(self, *, tenant_id: str, user_key: str) -> tuple[str, tuple[str, ...]]:
        """The memory scope an end user's key reads, and every user key that reads it (the
        person's identities, or the key alone): whose sessions that memory was said in."""
        person = await self.identities.person(tenant_id=tenant_id, user_key=user_key)
        if person is None:
            return user_key, (user_key,)
        return person_scope(person.id), tuple(person.identities)

    async def read(self, *, tenant_id: str, scope_key: str) -> MemoryDocument:
        scope = await self.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        return await self.store.read(tenant_id=tenant_id, scope_key=scope)

    async def append(
        self, *, tenant_id: str, scope_key: str, entries: Sequence[NewEntry]
    ) -> list[MemoryEntry]:
        scope = await self.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        return await self.store.append(tenant_id=tenant_id, scope_key=scope, entries=entries)

    async def append_once(self, *, tenant_id: str, scope_key: str, entry: NewEntry) -> MemoryEntry:
        scope = await self.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        return await self.store.append_once(tenant_id=tenant_id, scope_key=scope, entry=entry)

    async def delete(self, *, tenant_id: str, scope_key: str, entry_id: str) -> None:
        scope = await self.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        await self.store.delete(tenant_id=tenant_id, scope_key=scope, entry_id=entry_id)

    async def replace(self, *, tenant_id: str, scope_key: str, content: str) -> MemoryDocument:
        scope = await self.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        return await self.store.replace(tenant_id=tenant_id, scope_key=scope, content=content)

    async def search(
        self, *, tenant_id: str, scope_key: str, query: str, limit: int
    ) -> list[MemoryEntry]:
        scope = await self.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        return await self.store.search(
            tenant_id=tenant_id, scope_key=scope, query=query, limit=limit
        )

    async def recent(self, *, tenant_id: str, scope_key: str, limit: int) -> list[MemoryEntry]:
        scope = await self.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        return await self.store.recent(tenant_id=tenant_id, scope_key=scope, limit=limit)


async def move_entries(
    store: MemoryStore, *, tenant_id: str, from_scope: str, into_scope: str
) -> int:
    """Move what `from_scope` remembers into `into_scope`; how many entries moved.

    Each entry is written into the new scope before it leaves the old one, so a crash between
    leaves a copy, never a gap; a second run skips what arrived already. What moves is what is
    still true of each entry (facts later entries replaced stay behind): the ids those
    replacements name are the old scope's. A summarizer entry keeps its provenance, so the
    range it distilled is still distilled once.
    """
    moving = (await store.read(tenant_id=tenant_id, scope_key=from_scope)).entries
    present = await store.read(tenant_id=tenant_id, scope_key=into_scope)
    arrived = {(entry.date, entry.current_content) for entry in present.entries}
    moved = 0
    for entry in moving:
        content = entry.current_content
        if content and (entry.date, content) not in arrived:
            copy = NewEntry(entry.source_kind, content, entry.date, entry.provenance)
            if copy.provenance is None:
                await store.append(tenant_id=tenant_id, scope_key=into_scope, entries=[copy])
            else:
                await store.append_once(tenant_id=tenant_id, scope_key=into_scope, entry=copy)
            arrived.add((entry.date, content))  # a line the scope holds twice arrives once
            moved += 1
        # Gone already: a line the scope held twice can take its twin's id once one is deleted.
        with contextlib.suppress(MemoryEntryNotFound):
            await store.delete(tenant_id=tenant_id, scope_key=from_scope, entry_id=entry.id)
    return moved
