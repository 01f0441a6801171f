"""Storage faults (docs/operations.md, reliability E, issue: hardening): a full disk, a PostgreSQL
server out of connections, a pool with no free connection, connections the server dropped. Each
answers 503 `storage_unavailable` with `Retry-After` (never a 500), `/api/health` says the database
is unavailable while it lasts, nothing answered before is lost, nothing is stored twice, and the
next request after the fault works.

Real faults only: the disk is a small tmpfs filled to the last byte (root only: skipped
elsewhere), the connection limit is PostgreSQL's own for a role."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from backend.app import create_app
from backend.composition.build import check_settings
from backend.errors import ConfigError
from backend.providers.scripted import ScriptedProvider
from tests.conftest import fill, make_settings, serve

FAULTS = {"injected": 0, "answered_503": 0, "lost": 0, "duplicated": 0}


@pytest.fixture(scope="module", autouse=True)
def figure() -> Iterator[None]:
    yield
    print(
        f"\nstorage faults: {FAULTS['injected']} injected, {FAULTS['answered_503']} answered 503, "
        f"{FAULTS['lost']} lost, {FAULTS['duplicated']} duplicated"
    )


async def send(client: httpx.AsyncClient, session_id: str, message: str) -> httpx.Response:
    return await client.post("/api/chat/send", json={"session_id": session_id, "message": message})


def expect_503(response: httpx.Response) -> None:
    FAULTS["answered_503"] += response.status_code == 503
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "storage_unavailable"
    assert int(response.headers["Retry-After"]) >= 1


async def stored(client: httpx.AsyncClient, session_id: str) -> list[tuple[str, str]]:
    response = await client.get(f"/api/chat/sessions/{session_id}/messages")
    assert response.status_code == 200, response.text
    return [(m["role"], m["content"]) for m in response.json()["messages"]]


def count_losses(messages: list[tuple[str, str]], expected: list[tuple[str, str]]) -> None:
    FAULTS["lost"] += sum(1 for m in expected if m not in messages)
    FAULTS["duplicated"] += sum(1 for m in expected if messages.count(m) > 1)


async def test_a_full_disk_is_503_and_health_says_so_until_space_is_back(
    small_disk: Path, tmp_path: Path
) -> None:
    settings = make_settings(f"sqlite+aiosqlite:///{small_disk / 'tally.db'}", tmp_path)
    provider = ScriptedProvider(replies=["before", "after"])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        assert (await send(client, session_id, "hello before")).status_code == 200

        filler = fill(small_disk)
        FAULTS["injected"] += 1
        big = "x" * 90_000  # more than the few bytes SQLite may still find in its pages
        refused = await send(client, session_id, big)
        streamed = await client.post(
            "/api/chat/send", json={"session_id": session_id, "message": big, "stream": True}
        )
        new_session = await client.post("/api/chat/sessions", json={"title": "y" * 200})
        during = await client.get("/api/health")
        readable = await stored(client, session_id)

        filler.unlink()
        assert (await send(client, session_id, "hello after")).status_code == 200
        after = await client.get("/api/health")
        final = await stored(client, session_id)

    expect_503(refused)
    expect_503(streamed)  # refused before the stream began: an HTTP error, not an event
    if new_session.status_code != 201:  # a small row may still fit in a page
        expect_503(new_session)
    assert during.status_code == 503 and during.json()["database"] == "unavailable"
    assert "full" in during.json()["database_problem"]
    assert readable[:2] == [("user", "hello before"), ("assistant", "before")]
    assert after.status_code == 200 and after.json()["database"] == "ok"
    expected = [("user", "hello before"), ("assistant", "before")]
    expected += [("user", "hello after"), ("assistant", "after")]
    count_losses(final, expected)
    assert [m for m in final if m[1] != big] == expected


async def test_no_free_pooled_connection_is_503_then_serves_again(
    postgres: str, tmp_path: Path
) -> None:
    settings = make_settings(
        postgres,
        tmp_path,
        database={"url": postgres, "pool_size": 1, "max_overflow": 0, "pool_timeout_s": 0.5},
    )
    app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        held = await app.state.services.database.engine.connect()  # a query that never ends
        FAULTS["injected"] += 1
        try:
            listed = await client.get("/api/chat/sessions")
            turn = await send(client, session_id, "while the pool is empty")
            health = await client.get("/api/health")
        finally:
            await held.close()
        answered = await send(client, session_id, "after")
        messages = await stored(client, session_id)

    expect_503(listed)
    expect_503(turn)
    assert health.status_code == 503 and health.json()["database"] == "unavailable"
    assert answered.status_code == 200, answered.text
    count_losses(messages, [("user", "after"), ("assistant", "ok")])
    assert messages[-2:] == [("user", "after"), ("assistant", "ok")]


@pytest.fixture
async def limited_role(postgres: str) -> AsyncIterator[tuple[str, Any]]:
    """A login role PostgreSQL lets open one connection at a time; its URL, and an engine of
    the superuser to change the limit with."""
    role = f"tally_limited_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = create_async_engine(postgres, isolation_level="AUTOCOMMIT")
    database = postgres.rsplit("/", 1)[1]
    async with admin.connect() as conn:
        await conn.execute(text(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1"))
        await conn.execute(text(f'GRANT ALL ON DATABASE "{database}" TO {role}'))
        await conn.execute(text(f"GRANT ALL ON SCHEMA public TO {role}"))
    base, _, host = postgres.partition("@")
    url = f"{base.split('//')[0]}//{role}@{host}"
    try:
        yield url, admin
    finally:
        async with admin.connect() as conn:
            await conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
            await conn.execute(text(f"DROP OWNED BY {role}"))
            await conn.execute(text(f"DROP ROLE {role}"))
        await admin.dispose()


async def test_a_server_out_of_connections_is_503_not_500(
    limited_role: tuple[str, Any], tmp_path: Path
) -> None:
    url, admin = limited_role
    role = url.split("//")[1].split("@")[0]
    settings = make_settings(url, tmp_path)
    app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        # A turn needs a second connection (its session lock): PostgreSQL refuses it.
        FAULTS["injected"] += 1
        refused = await send(client, session_id, "one connection is not enough")
        async with admin.connect() as conn:
            await conn.execute(text(f"ALTER ROLE {role} CONNECTION LIMIT -1"))
        answered = await send(client, session_id, "now there are more")
        messages = await stored(client, session_id)

    expect_503(refused)
    assert "too many connections" in refused.json()["error"]["message"]
    assert answered.status_code == 200, answered.text
    count_losses(messages, [("user", "now there are more"), ("assistant", "ok")])


async def test_connections_the_server_dropped_are_replaced_unnoticed(
    postgres: str, tmp_path: Path
) -> None:
    app = create_app(make_settings(postgres, tmp_path), provider=ScriptedProvider(replies=["ok"]))
    admin = create_async_engine(postgres)
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        assert (await send(client, session_id, "first")).status_code == 200
        async with admin.connect() as conn:
            dropped = await conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            FAULTS["injected"] += int(dropped.scalar_one())
        answered = await send(client, session_id, "second")
        messages = await stored(client, session_id)
    await admin.dispose()
    assert answered.status_code == 200, answered.text
    count_losses(messages, [("user", "first"), ("user", "second")])
    assert [m for m in messages if m[0] == "user"] == [("user", "first"), ("user", "second")]


async def test_pools_that_cannot_fit_the_server_stop_start_up(
    postgres: str, tmp_path: Path
) -> None:
    wide = {"url": postgres, "pool_size": 40, "max_overflow": 20, "processes": 2}
    with pytest.raises(ConfigError) as refused:
        await check_settings(make_settings(postgres, tmp_path, database=wide))
    await check_settings(make_settings(postgres, tmp_path, database={"url": postgres}))
    assert "2 process(es) x 90 connections" in refused.value.message
    assert "max_connections" in refused.value.message
