"""Engine and transactions for SQLite (aiosqlite) and PostgreSQL (asyncpg), one code path.

SQLite under concurrency loses updates or reports "database is locked" unless it runs in WAL
mode with a busy timeout, writes open with `BEGIN IMMEDIATE`, and writers queue in-process
behind one lock (docs/architecture.md, storage invariants). `Database.write()` does all of that;
`Database.read()` opens a plain deferred transaction that never blocks the writer.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from backend.settings.server import DatabaseSettings
from backend.storage import sqlite_driver
from backend.storage.faults import as_storage_fault
from backend.storage.notices import MessageNotices

_WRITE_OPTION = "tally_write"
P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Pools:
    """PostgreSQL connection pools of one process (`database.*` in config.yaml, where the
    defaults are set)."""

    size: int
    max_overflow: int
    timeout_s: float
    lock_size: int
    lock_max_overflow: int
    lock_timeout_s: float

    @classmethod
    def of(cls, settings: DatabaseSettings) -> Pools:
        return cls(
            size=settings.pool_size,
            max_overflow=settings.max_overflow,
            lock_size=settings.lock_pool_size,
            lock_max_overflow=settings.lock_max_overflow,
            timeout_s=settings.pool_timeout_s,
            lock_timeout_s=settings.lock_pool_timeout_s,
        )


class Database:
    def __init__(self, url: str, pools: Pools | None = None) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.pools = pools or Pools.of(DatabaseSettings())
        self.write_fault: str | None = None  # why the latest write failed, while it does
        self.engine: AsyncEngine = _create_engine(url, self.pools)
        # The same pool; its connections say they write (the `begin` event reads it), without
        # a call of their own each time.
        self._write_engine = self.engine.execution_options(**{_WRITE_OPTION: True})
        self._lock_engine: AsyncEngine | None = None
        # One writer at a time in this process: on SQLite writers then wait in the event
        # loop (fair, FIFO) instead of sleeping in SQLite's busy handler.
        self._write_lock: asyncio.Lock | None = asyncio.Lock() if self.is_sqlite else None
        self.notices = MessageNotices()  # what this process did to messages, for copies

    @property
    def is_shared(self) -> bool:
        """Whether other processes may write it too (PostgreSQL); a SQLite database has one
        serving process, so whatever changes it passes through this one."""
        return not self.is_sqlite

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn, conn.begin():
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction, committed on exit and rolled back on any exception. A storage
        fault is kept in `write_fault` (for health) until a write succeeds again."""
        async with self._writer() as conn, conn.begin():
            yield conn

    async def run_read(
        self, work: Callable[Concatenate[Connection, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`work(connection, *args, **kwargs)` in a read transaction, as plain (synchronous)
        SQLAlchemy code. Each statement awaited on an `AsyncConnection` makes a pass through a
        greenlet of its own, its begin and its commit one more each (about 25 µs of CPU a
        pass): what every turn reads and writes is done this way, in one pass."""
        async with self.engine.connect() as conn:
            return await conn.run_sync(_in_transaction, work, *args, **kwargs)

    async def run_write(
        self, work: Callable[Concatenate[Connection, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`work(connection, *args, **kwargs)` in a write transaction (see `write` and
        `run_read`)."""
        async with self._writer() as conn:
            return await conn.run_sync(_in_transaction, work, *args, **kwargs)

    @asynccontextmanager
    async def _writer(self) -> AsyncIterator[AsyncConnection]:
        """A connection that writes, held alone in this process on SQLite."""
        try:
            async with self._write_lock or nullcontext(), self._write_engine.connect() as conn:
                yield conn
        except Exception as exc:
            fault = as_storage_fault(exc)
            if fault is not None:
                self.write_fault = fault.message
            raise
        self.write_fault = None

    @property
    def lock_engine(self) -> AsyncEngine:
        """PostgreSQL connections that hold session advisory locks for a whole turn. A pool
        apart from the main one: turns holding locks can never starve the queries they make."""
        if self._lock_engine is None:
            pools = self.pools
            self._lock_engine = create_async_engine(
                self.url,
                pool_size=pools.lock_size,
                max_overflow=pools.lock_max_overflow,
                pool_timeout=pools.lock_timeout_s,
                pool_pre_ping=True,
            )
        return self._lock_engine

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self._lock_engine is not None:
            await self._lock_engine.dispose()


def open_database(settings: DatabaseSettings) -> Database:
    """The database config.yaml names, with its pool sizes."""
    return Database(settings.url, Pools.of(settings))


def _create_engine(url: str, pools: Pools) -> AsyncEngine:
    if not url.startswith("sqlite"):
        return create_async_engine(
            url,
            pool_size=pools.size,
            max_overflow=pools.max_overflow,
            pool_timeout=pools.timeout_s,
            pool_pre_ping=True,  # a connection the server dropped is replaced, not an error
        )
    path = url.split(":///", 1)[1]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # One trip to aiosqlite's thread per statement (sqlite_driver.py), not four.
        connect = functools.partial(sqlite_driver.connect, path)
        engine = create_async_engine(url, async_creator=connect)
    else:
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
    # FULL syncs the WAL at each commit, as PostgreSQL does by default: a commit answered to a
    # client survives a power cut and a disk the kernel turns read-only on an error (whose
    # unsynced writes are dropped). NORMAL lost the last answered turns there (issue 30).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _in_transaction(
    conn: Connection, work: Callable[Concatenate[Connection, P], T], /, *args: Any, **kwargs: Any
) -> T:
    with conn.begin():
        return work(conn, *args, **kwargs)


def _begin_sqlite_transaction(conn: Connection) -> None:
    is_write = conn.get_execution_options().get(_WRITE_OPTION, False)
    begin = "BEGIN IMMEDIATE" if is_write else "BEGIN"
    if not sqlite_driver.begin_with_next_statement(conn.connection.driver_connection, begin):
        conn.exec_driver_sql(begin)  # an in-memory database, on aiosqlite's own connections


async def pool_budget_problem(database: Database, settings: DatabaseSettings) -> str | None:
    """Why the pools configured cannot fit the PostgreSQL server's connection limit, if they
    cannot: every process may open all of its connections at once. None on SQLite, and when
    the server cannot be asked (serving reports that itself)."""
    if database.is_sqlite:
        return None
    try:
        async with database.read() as conn:
            limit = int((await conn.exec_driver_sql("SHOW max_connections")).scalar_one())
            reserved = int(
                (await conn.exec_driver_sql("SHOW superuser_reserved_connections")).scalar_one()
            )
    except (SQLAlchemyError, OSError):
        return None
    needed = settings.connections_per_process * settings.processes
    if needed <= limit - reserved:
        return None
    return (
        f"database: {settings.processes} process(es) x {settings.connections_per_process} "
        f"connections (pool_size + max_overflow + lock_pool_size + lock_max_overflow) = "
        f"{needed}, but the server takes {limit - reserved} (max_connections {limit} minus "
        f"{reserved} reserved): lower the pool sizes, or raise max_connections"
    )
