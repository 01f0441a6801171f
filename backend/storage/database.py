"""Engine and transactions for SQLite (aiosqlite) and PostgreSQL (asyncpg), one code path.

SQLite under concurrency loses updates or reports "database is locked" unless it runs in WAL
mode with a busy timeout, writes open with `BEGIN IMMEDIATE`, and writers queue in-process
behind one lock (see NOTES.md). `Database.write()` does all of that; `Database.read()` opens a
plain deferred transaction that never blocks the writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

_WRITE_OPTION = "tally_write"


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.engine: AsyncEngine = _create_engine(url)
        self._lock_engine: AsyncEngine | None = None
        # One writer at a time in this process: on SQLite writers then wait in the event
        # loop (fair, FIFO) instead of sleeping in SQLite's busy handler.
        self._write_lock: asyncio.Lock | None = asyncio.Lock() if self.is_sqlite else None

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn, conn.begin():
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction, committed on exit and rolled back on any exception."""
        async with self._write_lock or nullcontext(), self.engine.connect() as conn:
            await conn.execution_options(**{_WRITE_OPTION: True})
            async with conn.begin():
                yield conn

    @property
    def lock_engine(self) -> AsyncEngine:
        """PostgreSQL connections that hold session advisory locks for a whole turn. A pool
        apart from the main one: turns holding locks can never starve the queries they make."""
        if self._lock_engine is None:
            # Bounded below PostgreSQL's default 100 connections; a turn beyond it waits.
            self._lock_engine = create_async_engine(
                self.url, pool_size=20, max_overflow=30, pool_timeout=300
            )
        return self._lock_engine

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self._lock_engine is not None:
            await self._lock_engine.dispose()


def _create_engine(url: str) -> AsyncEngine:
    if not url.startswith("sqlite"):
        return create_async_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)
    path = url.split(":///", 1)[1]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, connect_args={"timeout": 30})
    event.listen(engine.sync_engine, "connect", _configure_sqlite_connection)
    event.listen(engine.sync_engine, "begin", _begin_sqlite_transaction)
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from the sqlite3 module: it would otherwise open deferred
    # transactions behind our back (see the `begin` listener).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # NORMAL is durable against process crashes in WAL mode; only a power cut can lose the
    # last commits, never corrupt the file.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _begin_sqlite_transaction(conn: Connection) -> None:
    is_write = conn.get_execution_options().get(_WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if is_write else "BEGIN")
