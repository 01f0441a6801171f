"""Locks every process sharing one PostgreSQL database sees: transaction-scoped advisory locks,
each named by a few strings (a signed 64-bit key, the same in every process for the same name).
On SQLite there is one process, and its writers already serialize: these are no-ops there."""

from __future__ import annotations

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
