"""Per-session turn serialization: turns of one session run one at a time, in arrival order.

In-process, an `asyncio.Lock` per session (FIFO). On PostgreSQL a transaction-scoped advisory
lock is held as well, so several worker processes serialize too.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text

from backend.storage.database import Database


class SessionLocks:
    def __init__(self, database: Database) -> None:
        self._database = database
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._holders: dict[tuple[str, str], int] = {}

    @asynccontextmanager
    async def hold(self, *, tenant_id: str, session_id: str) -> AsyncIterator[None]:
        key = (tenant_id, session_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._holders[key] = self._holders.get(key, 0) + 1
        try:
            async with lock:
                if self._database.is_sqlite:
                    yield
                else:
                    async with self._advisory(f"{tenant_id}/{session_id}"):
                        yield
        finally:
            self._holders[key] -= 1
            if self._holders[key] == 0:  # nobody waits: forget the lock, bounded memory
                del self._holders[key]
                del self._locks[key]

    @asynccontextmanager
    async def _advisory(self, name: str) -> AsyncIterator[None]:
        # A signed 64-bit key, the same in every process for the same session.
        digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
        key = int.from_bytes(digest, "big", signed=True)
        async with self._database.lock_engine.connect() as conn, conn.begin():
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
            yield
