"""`tally bench --workers`: what it needs from the config, and a PostgreSQL database of the
bench's own, made beside the configured one and dropped after: each workers scenario starts
empty, and the operator's data is never touched."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from backend.settings import Settings


@contextmanager
def scratch_database(configured_url: str, run: str) -> Iterator[str]:
    """The URL of a new, empty database on the configured server, named after `run`."""
    name = f"tally_bench_{os.getpid()}_{run}".replace("-", "_").lower()
    asyncio.run(_execute(configured_url, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(configured_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_execute(configured_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _execute(url: str, statement: str) -> None:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


def workers_problem(settings: Settings) -> str | None:
    if settings.database.url.startswith("sqlite"):
        return (
            f"--workers needs PostgreSQL: set database.url in {settings.source} (the bench makes "
            "a scratch database on that server for each run and drops it after)"
        )
    if settings.coordination.redis_url is None:
        return f"--workers needs coordination.redis_url in {settings.source}"
    return None
