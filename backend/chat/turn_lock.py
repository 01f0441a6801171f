"""Per-session turn serialization: turns of one session run one at a time, in arrival order.

In-process, an `asyncio.Lock` per session (FIFO). On PostgreSQL a transaction-scoped advisory
lock is held as well, so several worker processes serialize too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from backend.storage.database import Database
from backend.storage.locks import held


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
            async with lock, held(self._database, "tally.session", tenant_id, session_id):
                yield
        finally:
            self._holders[key] -= 1
            if self._holders[key] == 0:  # nobody waits: forget the lock, bounded memory
                del self._holders[key]
                del self._locks[key]
