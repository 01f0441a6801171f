"""Locks every process sharing one PostgreSQL database sees, each named by a few strings (a
signed 64-bit key, the same in every process for the same name): transaction-scoped advisory
locks, and a leadership held for a process's life. On SQLite there is one process, and its
writers already serialize: these are no-ops there."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.storage.database import Database

_LOCK = text("SELECT pg_advisory_xact_lock(:key)")


def lock_key(*name: str) -> int:
    digest = hashlib.blake2b("\0".join(name).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def lock_in(conn: AsyncConnection, *name: str) -> None:
    """Wait for the lock `name` in `conn`'s transaction; released when it ends."""
    if conn.dialect.name == "postgresql":
        await conn.execute(_LOCK, {"key": lock_key(*name)})


def lock_in_sync(conn: Connection, *name: str) -> None:
    """`lock_in` for a synchronous connection (Alembic's, inside `run_sync`)."""
    if conn.dialect.name == "postgresql":
        conn.execute(_LOCK, {"key": lock_key(*name)})


@asynccontextmanager
async def held(database: Database, *name: str) -> AsyncIterator[None]:
    """Hold the lock `name` for the block, on a connection of the lock pool (a turn holds its
    session's for as long as it runs, and must not starve the pool its queries use)."""
    if database.is_sqlite:
        yield
        return
    async with database.lock_engine.connect() as conn, conn.begin():
        await lock_in(conn, *name)
        yield


class Leadership:
    """A lock held for as long as a process leads (a bot's poller): PostgreSQL's session-level
    advisory lock, on a connection of its own; it is let go if the process dies."""

    def __init__(self, conn: AsyncConnection | None) -> None:
        self._conn = conn

    async def is_held(self) -> bool:
        """False once the connection holding it is gone (the lock went with it)."""
        if self._conn is None:
            return True
        try:
            await self._conn.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    async def release(self) -> None:
        if self._conn is None:
            return
        with contextlib.suppress(Exception):  # a lost connection released it already
            await self._conn.close()


async def try_lead(database: Database, *name: str) -> Leadership | None:
    """The lock `name`, or None while another process holds it. On SQLite (one process) this
    process always leads."""
    if database.is_sqlite:
        return Leadership(None)
    conn = await database.lock_engine.connect()
    try:
        taken = await conn.scalar(
            text("SELECT pg_try_advisory_lock(:key)"), {"key": lock_key(*name)}
        )
    except BaseException:
        await conn.close()
        raise
    if not taken:
        await conn.close()
        return None
    return Leadership(conn)
