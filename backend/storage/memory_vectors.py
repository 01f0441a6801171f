"""The stored embedding of each fact and message (`memory_vectors`), by embedding model.

Items are named `f:<hash of the fact's text>` within a memory scope, or `m:<message id>` (with
scope "", as a message belongs to its session, not to one memory). Writes never overwrite: two
processes embedding the same new item store it once, and either vector is the same text's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from backend.storage.database import Database
from backend.storage.tables import memory_vectors

_INSERTS: dict[str, Any] = {
    "sqlite": sqlite.insert(memory_vectors).on_conflict_do_nothing(),
    "postgresql": postgresql.insert(memory_vectors).on_conflict_do_nothing(),
}
_BATCH = 500  # items per lookup: well under every driver's bound-parameter limit


def message_item(message_id: int) -> str:
    return f"m:{message_id}"


class VectorRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def get(
        self, *, tenant_id: str, scope_key: str, model: str, items: Collection[str]
    ) -> dict[str, bytes]:
        """The stored vectors of those `items` that have one."""
        found: dict[str, bytes] = {}
        wanted = list(items)
        async with self._db.read() as conn:
            for start in range(0, len(wanted), _BATCH):
                rows = await conn.execute(
                    select(memory_vectors.c.item, memory_vectors.c.vector).where(
                        memory_vectors.c.tenant_id == tenant_id,
                        memory_vectors.c.model == model,
                        memory_vectors.c.scope_key == scope_key,
                        memory_vectors.c.item.in_(wanted[start : start + _BATCH]),
                    )
                )
                found.update({row.item: bytes(row.vector) for row in rows})
        return found

    async def put(
        self, *, tenant_id: str, scope_key: str, model: str, vectors: Mapping[str, bytes]
    ) -> None:
        """Store each item's vector unless it has one already."""
        if not vectors:
            return
        now = datetime.now(UTC)
        rows = [
            {
                "tenant_id": tenant_id,
                "scope_key": scope_key,
                "model": model,
                "item": item,
                "message_id": int(item[2:]) if item.startswith("m:") else None,
                "vector": vector,
                "created_at": now,
            }
            for item, vector in vectors.items()
        ]
        async with self._db.write() as conn:
            await conn.execute(_INSERTS[conn.dialect.name], rows)

    async def forget(
        self, *, tenant_id: str, scope_key: str, model: str, items: Collection[str]
    ) -> None:
        """Delete the vectors of facts a scope no longer holds (forgotten, replaced, moved)."""
        wanted = list(items)
        async with self._db.write() as conn:
            for start in range(0, len(wanted), _BATCH):
                await conn.execute(
                    delete(memory_vectors).where(
                        memory_vectors.c.tenant_id == tenant_id,
                        memory_vectors.c.model == model,
                        memory_vectors.c.scope_key == scope_key,
                        memory_vectors.c.item.in_(wanted[start : start + _BATCH]),
                    )
                )
