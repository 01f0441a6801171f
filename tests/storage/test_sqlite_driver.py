"""Tally's aiosqlite connections (storage/sqlite_driver.py): one trip to the connection's thread
per statement, with every row a query gives, and transactions that behave as SQLite's own."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError, OperationalError

from backend.storage.database import Database


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path}/driver.db")
    async with database.write() as conn:
        await conn.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT UNIQUE)"))
    yield database
    await database.dispose()


def count_trips(connection: Any) -> list[str]:
    """The calls the connection sends to its thread, by name, from now on."""
    trips: list[str] = []
    send = connection._execute

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        trips.append(getattr(fn, "__name__", repr(fn)))
        return await send(fn, *args, **kwargs)

    connection._execute = counted
    return trips


def record_statements(database: Database) -> list[str]:
    """The statements SQLAlchemy sends to the database's connections, from now on."""
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement)

    event.listen(database.engine.sync_engine, "before_cursor_execute", seen)
    return statements


async def test_a_query_and_all_of_its_rows_take_one_trip(database: Database) -> None:
    async with database.write() as conn:
        await conn.execute(
            text("INSERT INTO notes (body) VALUES (:body)"), [{"body": f"n{i}"} for i in range(150)]
        )
    async with database.read() as conn:
        trips = count_trips((await conn.get_raw_connection()).driver_connection)
        rows = (await conn.execute(text("SELECT body FROM notes ORDER BY id"))).all()
        written = await conn.execute(text("SELECT count(*) FROM notes WHERE body LIKE 'n1%'"))

        assert [row.body for row in rows] == [f"n{i}" for i in range(150)]
        assert written.scalar_one() == 61  # n1, n10-n19, n100-n149
        assert trips == ["_execute_and_fetch", "_execute_and_fetch"]


async def test_rows_come_one_by_one_in_parts_or_all_in_order(database: Database) -> None:
    async with database.write() as conn:
        await conn.execute(
            text("INSERT INTO notes (body) VALUES (:body)"), [{"body": f"n{i}"} for i in range(5)]
        )
    async with database.read() as conn:
        cursor = (await conn.get_raw_connection()).driver_connection.cursor()
        await cursor.execute("SELECT body FROM notes ORDER BY id")
        first = await cursor.fetchone()
        two = await cursor.fetchmany(2)
        rest = await cursor.fetchall()
        after = await cursor.fetchone()
        await cursor.close()

    assert first == ("n0",) and two == [("n1",), ("n2",)] and rest == [("n3",), ("n4",)]
    assert after is None


async def test_a_failed_write_rolls_back_what_its_transaction_did(database: Database) -> None:
    async with database.write() as conn:
        await conn.execute(text("INSERT INTO notes (body) VALUES ('kept')"))
    with pytest.raises(IntegrityError):
        async with database.write() as conn:
            await conn.execute(text("INSERT INTO notes (body) VALUES ('undone')"))
            await conn.execute(text("INSERT INTO notes (body) VALUES ('kept')"))  # not unique
    async with database.read() as conn:
        bodies = (await conn.execute(text("SELECT body FROM notes"))).scalars().all()

    assert bodies == ["kept"]


async def test_many_rows_written_at_once_are_one_transaction(database: Database) -> None:
    """The BEGIN held back goes with a statement of many parameter sets too: without it, each
    row would be written on its own and a failure would leave the rows before it."""
    with pytest.raises(IntegrityError):
        async with database.write() as conn:
            await conn.execute(
                text("INSERT INTO notes (body) VALUES (:body)"),
                [{"body": "first"}, {"body": "second"}, {"body": "first"}],  # not unique
            )
    async with database.write() as conn:
        await conn.execute(
            text("INSERT INTO notes (body) VALUES (:body)"), [{"body": "a"}, {"body": "b"}]
        )
    async with database.read() as conn:
        bodies = (await conn.execute(text("SELECT body FROM notes ORDER BY id"))).scalars().all()

    assert bodies == ["a", "b"]


async def test_a_connection_back_in_the_pool_sends_no_rollback_with_nothing_to_undo(
    database: Database,
) -> None:
    async with database.write() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        trips = count_trips(driver)
        await conn.execute(text("INSERT INTO notes (body) VALUES ('a')"))
    async with database.write() as conn:  # the same connection, back from the pool
        assert (await conn.get_raw_connection()).driver_connection is driver
        await conn.execute(text("INSERT INTO notes (body) VALUES ('b')"))

    assert "rollback" not in trips and trips.count("commit") == 2
    assert isinstance(driver._conn, sqlite3.Connection) and not driver._conn.in_transaction


async def test_a_read_takes_one_trip_a_query_and_a_write_one_more_to_commit(
    database: Database,
) -> None:
    async with database.read() as conn:
        trips = count_trips((await conn.get_raw_connection()).driver_connection)
        await conn.execute(text("SELECT count(*) FROM notes"))
        await conn.execute(text("SELECT count(*) FROM notes"))
    read = list(trips)
    async with database.write() as conn:
        trips = count_trips((await conn.get_raw_connection()).driver_connection)
        await conn.execute(text("INSERT INTO notes (body) VALUES ('a')"))

    # BEGIN goes with the first statement; a read's end lets go of its snapshot in the loop
    assert read == ["_execute_and_fetch", "_execute_and_fetch"]
    assert trips == ["_execute_and_fetch", "commit"]


async def test_a_transaction_begins_without_a_statement_of_its_own_in_sqlalchemy(
    database: Database,
) -> None:
    """The BEGIN is handed to the connection to go with the first statement; executed through
    SQLAlchemy it cost a statement's whole way there, three times a turn."""
    statements = record_statements(database)
    async with database.write() as conn:
        await conn.execute(text("INSERT INTO notes (body) VALUES ('a')"))
    async with database.read() as conn:
        await conn.execute(text("SELECT count(*) FROM notes"))

    assert statements == ["INSERT INTO notes (body) VALUES ('a')", "SELECT count(*) FROM notes"]


async def test_an_in_memory_database_begins_its_transactions_as_statements() -> None:
    database = Database("sqlite+aiosqlite:///:memory:")
    statements = record_statements(database)
    try:
        async with database.write() as conn:
            await conn.execute(text("CREATE TABLE notes (body TEXT)"))
            await conn.execute(text("INSERT INTO notes (body) VALUES ('a')"))
        async with database.read() as conn:
            bodies = (await conn.execute(text("SELECT body FROM notes"))).scalars().all()
    finally:
        await database.dispose()

    assert bodies == ["a"]
    assert [s.split(" (")[0] for s in statements] == [
        "BEGIN IMMEDIATE",
        "CREATE TABLE notes",
        "INSERT INTO notes",
        "BEGIN",
        "SELECT body FROM notes",
    ]


async def test_a_read_ended_in_the_loop_lets_a_checkpoint_pass(
    database: Database, tmp_path: Path
) -> None:
    """A read left open would keep its snapshot: a checkpoint could never pass it, and the
    write-ahead log would grow for as long as the connection sits in the pool."""
    async with database.read() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        await conn.execute(text("SELECT count(*) FROM notes"))
    async with database.write() as conn:
        await conn.execute(text("INSERT INTO notes (body) VALUES ('a')"))
    assert isinstance(driver._conn, sqlite3.Connection) and not driver._conn.in_transaction

    other = sqlite3.connect(tmp_path / "driver.db")
    busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    other.close()
    assert busy == 0


async def test_a_begin_that_cannot_take_the_write_lock_fails_its_statement_and_holds_nothing(
    database: Database, tmp_path: Path
) -> None:
    blocker = sqlite3.connect(tmp_path / "driver.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    async with database.read() as conn:  # lower the busy wait for this one connection
        driver = (await conn.get_raw_connection()).driver_connection
        await conn.exec_driver_sql("PRAGMA busy_timeout=50")
    with pytest.raises(OperationalError, match="locked"):
        async with database.write() as conn:
            assert (await conn.get_raw_connection()).driver_connection is driver
            await conn.execute(text("INSERT INTO notes (body) VALUES ('lost')"))
    blocker.execute("ROLLBACK")
    blocker.close()
    async with database.write() as conn:  # the connection is fine afterwards
        await conn.execute(text("INSERT INTO notes (body) VALUES ('kept')"))
    async with database.read() as conn:
        bodies = (await conn.execute(text("SELECT body FROM notes"))).scalars().all()

    assert bodies == ["kept"] and not driver._conn.in_transaction


async def test_a_script_is_refused_inside_a_transaction(database: Database) -> None:
    """sqlite3 commits whatever is open before a script: it would end SQLAlchemy's
    transaction behind its back."""
    async with database.read() as conn:
        cursor = (await conn.get_raw_connection()).driver_connection.cursor()
        with pytest.raises(NotImplementedError):
            await cursor.executescript("SELECT 1;")
        await cursor.close()
