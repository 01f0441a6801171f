"""aiosqlite connections that go to their thread once per statement.

aiosqlite runs every call in the connection's own thread and wakes the event loop with each
result: two thread switches, about 50 µs of CPU on a small machine. Through SQLAlchemy's
adapter a query makes four such trips (open a cursor, execute, fetch the rows, close the
cursor), a write three, and every connection given back to the pool one more to roll back:
about forty a chat turn, more CPU than anything else Tally adds to the turn. Here a statement
is executed and its rows fetched in one trip; cursors are opened and closed in the loop's
thread (no statement of theirs is running then: SQLAlchemy runs one statement at a time on a
connection, and SQLite serializes calls on a connection from any thread, `sqlite3.threadsafety`
3); a rollback with no transaction open is not sent, since it would do nothing.
"""

from __future__ import annotations

import functools
import sqlite3
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, cast

import aiosqlite

BUSY_TIMEOUT_S = 30  # as the busy_timeout pragma set on every connection
ROWS_AT_ONCE = 64  # aiosqlite's default chunk for iterating a cursor
Parameters = Iterable[Any] | Mapping[str, Any]  # what aiosqlite's own cursor takes


class _Cursor(aiosqlite.Cursor):
    """A cursor whose `execute` brings back all of the statement's rows with it (SQLAlchemy
    fetches them all at once too, except for a streamed result, which Tally does not use)."""

    def __init__(self, connection: aiosqlite.Connection, cursor: sqlite3.Cursor) -> None:
        super().__init__(connection, cursor)
        self._rows: deque[Any] = deque()

    async def execute(self, sql: str, parameters: Parameters | None = None) -> _Cursor:
        in_its_thread: Callable[..., Awaitable[list[Any]]] = self._execute  # aiosqlite's, untyped
        self._rows = deque(await in_its_thread(_execute_and_fetch, self._cursor, sql, parameters))
        return self

    async def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        count = min(len(self._rows), self.arraysize if size is None else size)
        return [self._rows.popleft() for _ in range(count)]

    async def fetchall(self) -> list[Any]:
        rows, self._rows = list(self._rows), deque()
        return rows

    async def close(self) -> None:
        self._rows.clear()
        self._cursor.close()


class _Connection(aiosqlite.Connection):
    def cursor(self) -> _Cursor:  # type: ignore[override]  # SQLAlchemy enters it, never awaits
        return _Cursor(self, self._conn.cursor())

    async def rollback(self) -> None:
        if self._conn.in_transaction:
            await super().rollback()


async def connect(path: str) -> aiosqlite.Connection:
    """A connection to the SQLite file at `path`, for SQLAlchemy's `async_creator`."""
    connector = functools.partial(
        sqlite3.connect, path, timeout=BUSY_TIMEOUT_S, check_same_thread=False
    )
    connection = _Connection(connector, ROWS_AT_ONCE)
    connection._thread.daemon = True  # as SQLAlchemy's adapter does: exit never waits on it
    return await connection


def _execute_and_fetch(
    cursor: sqlite3.Cursor, sql: str, parameters: Parameters | None
) -> list[Any]:
    cursor.execute(sql, () if parameters is None else cast(Any, parameters))
    return cursor.fetchall() if cursor.description else []
