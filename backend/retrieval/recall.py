"""Finding what a memory scope holds: one ScopeIndex per scope in use (the least recently used
dropped past `capacity`), refreshed before each search from the stored memory and messages,
with vectors embedded once and kept in `memory_vectors`.

Retrieval never fails a turn: a model that cannot embed leaves ranking to words, a database
that cannot give vectors leaves them to be made again, and the caller handles a memory that
cannot be read at all (the prompt goes without it).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from sqlalchemy.exc import IntegrityError

from backend.domain.messages import StoredMessage
from backend.memory.entries import MemoryDocument
from backend.retrieval.embedders import Embedder, EmbeddingFailed, Vectors
from backend.retrieval.known_sessions import KnownSessions
from backend.retrieval.recollections import Recollection, fact_recollection_of, turn_recollection
from backend.retrieval.scope_index import ScopeIndex
from backend.storage.archive import ArchiveReader, SaidMessage
from backend.storage.faults import as_storage_fault
from backend.storage.memory_vectors import VectorRepository
from backend.storage.notices import Deleted

log = logging.getLogger(__name__)
T = TypeVar("T")

ARCHIVE_BATCH = 1000  # messages read at a time while a scope's index catches up
EMBED_BATCH = 2048  # items given vectors per refresh; the rest wait for the next one
EMBED_CHARS = 2000  # a message's start stands for it when it is embedded


@dataclass(frozen=True, slots=True)
class Scope:
    """A memory and the sessions whose messages it searches: `user_keys` None for every
    session of the tenant, empty for its sessions without an end user."""

    tenant_id: str
    memory_key: str
    user_keys: tuple[str, ...] | None

    def holds(self, user_key: str | None) -> bool:
        """Whether a session of end user `user_key` is one of the scope's."""
        if self.user_keys is None:
            return True
        return user_key in self.user_keys if self.user_keys else not user_key


@dataclass(frozen=True, slots=True)
class _IndexKey:
    scope: Scope
    embedder: str | None  # the vector space its vectors are in
    has_archive: bool


class Recall:
    """One per process, for every tenant: each call names the embedder its tenant uses."""

    def __init__(
        self, *, archive: ArchiveReader, vectors: VectorRepository, capacity: int = 64
    ) -> None:
        self._archive = archive
        self._vectors = vectors
        self._capacity = capacity
        self._indexes: OrderedDict[_IndexKey, ScopeIndex] = OrderedDict()
        self._sessions = KnownSessions()  # where each session's words are said, and by whom

    async def refreshed(
        self,
        scope: Scope,
        document: MemoryDocument,
        embedder: Embedder | None,
        *,
        search_archive: bool = True,
    ) -> ScopeIndex:
        """The scope's index, in step with `document` and (with `search_archive`) with every
        message its sessions said so far."""
        space = None if embedder is None else embedder.name
        index = self._index(_IndexKey(scope, space, search_archive))
        vectors = None if embedder is None else _VectorKeeper(embedder, self._vectors, scope)
        asked = index.ask()
        async with index.refreshing:
            if index.facts_changed(document):
                _, gone = index.sync_facts(document)
                if vectors is not None:
                    await vectors.forget(gone, still=index)
            if search_archive and self._must_read(index, asked):
                index.reading()
                await self._catch_up(scope, index)
            if vectors is not None:
                await vectors.give(index, index.unvectored(EMBED_BATCH))
        return index

    async def embed_query(self, text: str, embedder: Embedder | None) -> Vectors | None:
        """The query's vector; None without an embedder or when it fails (words alone rank)."""
        if embedder is None or not text.strip():
            return None
        try:
            vectors = await embedder.embed([text[:EMBED_CHARS]])
        except EmbeddingFailed as exc:
            log.warning("memory ranked by words alone: %s", exc.message)
            return None
        return np.asarray(vectors[0], dtype=np.float32)

    async def gone(
        self, scope: Scope, index: ScopeIndex, turns: Sequence[Recollection]
    ) -> set[int]:
        """The keys of those `turns` deleted since they were indexed by another process (this
        one's deletions are forgotten as they happen); the index forgets them."""
        ids = {item.key for item in turns}
        if not ids or not self._archive.is_shared:
            return set()
        gone = ids - await self._archive.existing(tenant_id=scope.tenant_id, ids=ids)
        index.drop(gone)
        return gone

    async def remember(
        self, tenant_id: str, memory_key: str, facts: Sequence[str], embedder: Embedder | None
    ) -> None:
        """Embed and store the vectors of facts just written, so that no turn has to."""
        if embedder is None or not facts:
            return
        keeper = _VectorKeeper(embedder, self._vectors, Scope(tenant_id, memory_key, None))
        await keeper.give(None, [fact_recollection_of(fact) for fact in dict.fromkeys(facts)])

    def said(self, tenant_id: str, message: StoredMessage) -> None:
        """Add a message this process just stored to the indexes of its tenant that follow the
        notices (the database is this process's alone): each then needs no query for it. A
        message of a session an index has not met yet makes it read instead."""
        if self._archive.is_shared or message.status != "complete":
            return
        session = self._sessions.get(message.session_id)
        for key, index in self._indexes.items():
            if key.scope.tenant_id != tenant_id or not key.has_archive:
                continue
            if session is None:
                index.read_from(message.id - 1)
            elif key.scope.holds(session.user_key):
                said = SaidMessage(
                    id=message.id,
                    session_id=message.session_id,
                    role=message.role,
                    content=message.content,
                    created_at=message.created_at,
                    origin=session.origin,
                    user_key=session.user_key,
                )
                index.add_turns([turn_recollection(said)])

    def deleted(self, deleted: Deleted) -> None:
        """Drop messages deleted in this process from every index of their tenant."""
        for key, index in self._indexes.items():
            if key.scope.tenant_id == deleted.tenant_id:
                index.drop(
                    item.key
                    for item in list(index.items.values())
                    if item.is_turn and deleted.covers(item.session_id, item.key)
                )

    def close(self) -> None:
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()

    def _index(self, key: _IndexKey) -> ScopeIndex:
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = ScopeIndex()
            while len(self._indexes) > self._capacity:
                _, dropped = self._indexes.popitem(last=False)
                dropped.close()
        self._indexes.move_to_end(key)
        return index

    def _must_read(self, index: ScopeIndex, asked: int) -> bool:
        """Whether the refresh `asked` reads what was said since: on a shared database unless
        a read began after it was asked for; on this process's own, only when the notices
        cannot tell (the index is new, or met a session it did not know)."""
        if self._archive.is_shared:
            return not index.is_read_since(asked)
        return index.unread_after is not None

    async def _catch_up(self, scope: Scope, index: ScopeIndex) -> None:
        after = index.said_after if index.unread_after is None else index.unread_after
        index.read_from(None)
        while True:
            said = await self._archive.said_after(
                tenant_id=scope.tenant_id,
                user_keys=scope.user_keys,
                after_id=after,
                limit=ARCHIVE_BATCH,
            )
            for message in said:
                self._sessions.meet(message.session_id, message.origin, message.user_key)
            index.add_turns([turn_recollection(message) for message in said])
            if len(said) < ARCHIVE_BATCH:
                return
            after = said[-1].id


class _VectorKeeper:
    """Vectors of one scope's items for one embedder: stored ones read back, the rest embedded
    and stored (facts always; messages only for a remote model, since a local one embeds
    faster than the database answers). A failure leaves items for the next refresh."""

    def __init__(self, embedder: Embedder, stored: VectorRepository, scope: Scope) -> None:
        self._embedder = embedder
        self._stored = stored
        self._scope = scope

    async def give(self, index: ScopeIndex | None, items: Sequence[Recollection]) -> None:
        if not items:
            return
        vectors = await self._read(items)
        missing = [item for item in items if item.vector_item not in vectors]
        try:
            made = await self._embedder.embed([item.text[:EMBED_CHARS] for item in missing])
        except EmbeddingFailed as exc:
            log.warning("memory items left without vectors for now: %s", exc.message)
        else:
            fresh = dict(zip((item.vector_item for item in missing), made, strict=True))
            vectors.update(fresh)
            await self._write([item for item in missing if self._is_kept(item)], fresh)
        ready = [item for item in items if item.vector_item in vectors]
        if index is not None and ready:
            index.add_vectors(
                [item.key for item in ready], np.stack([vectors[i.vector_item] for i in ready])
            )

    async def forget(self, gone: Sequence[Recollection], *, still: ScopeIndex) -> None:
        """Delete the stored vectors of facts the memory no longer holds."""
        kept = {item.vector_item for item in still.items.values() if not item.is_turn}
        items = {item.vector_item for item in gone if not item.is_turn} - kept
        if items:
            await self._guarded(
                self._stored.forget(
                    tenant_id=self._scope.tenant_id,
                    scope_key=self._scope.memory_key,
                    model=self._embedder.name,
                    items=items,
                ),
                "vectors of forgotten facts not deleted now",
            )

    def _is_kept(self, item: Recollection) -> bool:
        return not item.is_turn or not self._embedder.is_local

    def _scope_key(self, item: Recollection) -> str:
        return "" if item.is_turn else self._scope.memory_key  # a message is no one memory's

    async def _read(self, items: Sequence[Recollection]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        for scope_key, group in _grouped([i for i in items if self._is_kept(i)], self._scope_key):
            rows = await self._guarded(
                self._stored.get(
                    tenant_id=self._scope.tenant_id,
                    scope_key=scope_key,
                    model=self._embedder.name,
                    items=[item.vector_item for item in group],
                ),
                "stored vectors not read now",
            )
            for item, raw in (rows or {}).items():
                found[item] = np.frombuffer(raw, dtype=np.float32)
        return found

    async def _write(self, items: Sequence[Recollection], fresh: dict[str, Vectors]) -> None:
        for scope_key, group in _grouped(items, self._scope_key):
            await self._guarded(
                self._stored.put(
                    tenant_id=self._scope.tenant_id,
                    scope_key=scope_key,
                    model=self._embedder.name,
                    vectors={i.vector_item: fresh[i.vector_item].tobytes() for i in group},
                ),
                "vectors not stored now",
            )

    async def _guarded(self, call: Awaitable[T], what: str) -> T | None:
        """`call`'s result, or None when the database cannot do it now (or the message was
        deleted meanwhile): vectors are made again, never worth failing a turn for."""
        try:
            return await call
        except IntegrityError as exc:
            log.warning("%s: %s", what, exc.__class__.__name__)
        except Exception as exc:
            if as_storage_fault(exc) is None:
                raise
            log.warning("%s: %s", what, exc)
        return None


def _grouped(
    items: Iterable[Recollection], key: Callable[[Recollection], str]
) -> list[tuple[str, list[Recollection]]]:
    groups: dict[str, list[Recollection]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.items())
