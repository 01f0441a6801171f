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

A transaction costs no trips of its own either: its BEGIN, handed over by SQLAlchemy's `begin`
event (`begin_with_next_statement`), goes to the thread with its first statement (one of many
parameter sets too: else each row would be written on its own), and the end of one that only
read (a SELECT ends no other way) is done in the loop's thread, as it only lets go of the
snapshot it read: no disk, no wait. The end of a write (a COMMIT syncs the disk)
still goes to the thread. A read is then one trip per query, where it was three.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, cast

import aiosqlite

BUSY_TIMEOUT_S = 30  # as the busy_timeout pragma set on every connection
ROWS_AT_ONCE = 64  # aiosqlite's default chunk for iterating a cursor
_BEGIN = re.compile(r"\s*BEGIN\b", re.IGNORECASE)
_SELECT = re.compile(r"\s*SELECT\b", re.IGNORECASE)
Parameters = Iterable[Any] | Mapping[str, Any]  # what aiosqlite's own cursor takes


class _Cursor(aiosqlite.Cursor):
    """A cursor whose `execute` brings back all of the statement's rows with it (SQLAlchemy
    fetches them all at once too, except for a streamed result, which Tally does not use)."""

    def __init__(self, connection: aiosqlite.Connection, cursor: sqlite3.Cursor) -> None:
        super().__init__(connection, cursor)
        self._rows: deque[Any] = deque()

    async def execute(self, sql: str, parameters: Parameters | None = None) -> _Cursor:
        connection = cast(_Connection, self._conn)
        self._rows = deque()
        if connection.hold_begin(sql):
            return self
        begin = connection.statement_sent(sql)
        in_its_thread: Callable[..., Awaitable[list[Any]]] = self._execute  # aiosqlite's, untyped
        rows = await in_its_thread(_execute_and_fetch, self._cursor, sql, parameters, begin)
        self._rows = deque(rows)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Parameters]) -> _Cursor:
        connection = cast(_Connection, self._conn)
        self._rows = deque()
        begin = connection.statement_sent(sql)
        in_its_thread: Callable[..., Awaitable[None]] = self._execute  # aiosqlite's, untyped
        await in_its_thread(_execute_many, self._cursor, sql, parameters, begin)
        return self

    async def executescript(self, sql_script: str) -> _Cursor:
        raise NotImplementedError("a script would end the transaction SQLAlchemy keeps open")

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
    _begin: str | None = None  # a BEGIN held back, to go with the transaction's first statement
    _has_written = False  # whether the open transaction ran anything but a SELECT

    def cursor(self) -> _Cursor:  # type: ignore[override]  # SQLAlchemy enters it, never awaits
        return _Cursor(self, self._conn.cursor())

    def hold_begin(self, sql: str) -> bool:
        """Keep a BEGIN back, to send with the next statement; False for any other statement."""
        if not _BEGIN.match(sql):
            return False
        self._begin, self._has_written = sql, False
        return True

    def statement_sent(self, sql: str) -> str | None:
        """Note `sql` going to the thread; the BEGIN held back to run before it, if any."""
        self._has_written = self._has_written or not _SELECT.match(sql)
        begin, self._begin = self._begin, None
        return begin

    async def commit(self) -> None:
        if self._ends_in_loop():
            self._conn.commit()
        else:
            await super().commit()

    async def rollback(self) -> None:
        if self._ends_in_loop():
            self._conn.rollback()
        else:
            await super().rollback()

    def _ends_in_loop(self) -> bool:
        """Whether the transaction ends here, in the loop's thread: one that never began (its
        BEGIN still held, or none open) or that only read."""
        held, self._begin = self._begin is not None, None
        return held or not self._conn.in_transaction or not self._has_written


def begin_with_next_statement(connection: Any, sql: str) -> bool:
    """Hand the BEGIN `sql` to a connection of this module, to go with its next statement;
    False for any other connection. SQLAlchemy's `begin` event uses it: executing the BEGIN
    would cost a statement's whole way through SQLAlchemy (three a turn) to do only this."""
    return isinstance(connection, _Connection) and connection.hold_begin(sql)


async def connect(path: str) -> aiosqlite.Connection:
    """A connection to the SQLite file at `path`, for SQLAlchemy's `async_creator`."""
    connector = functools.partial(
        sqlite3.connect, path, timeout=BUSY_TIMEOUT_S, check_same_thread=False
    )
    connection = _Connection(connector, ROWS_AT_ONCE)
    connection._thread.daemon = True  # as SQLAlchemy's adapter does: exit never waits on it
    return await connection


def _execute_many(
    cursor: sqlite3.Cursor, sql: str, parameters: Iterable[Parameters], begin: str | None
) -> None:
    if begin is not None:
        cursor.execute(begin)
    cursor.executemany(sql, cast(Any, parameters))


def _execute_and_fetch(
    cursor: sqlite3.Cursor, sql: str, parameters: Parameters | None, begin: str | None = None
) -> list[Any]:
    if begin is not None:
        cursor.execute(begin)
    cursor.execute(sql, () if parameters is None else cast(Any, parameters))
    return cursor.fetchall() if cursor.description else []
