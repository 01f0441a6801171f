"""Migration 0006: the usage table gains the prompt-cache counters; days accounted before it
keep their figures and read 0 for both. The migrated schema is the one `tables.py` describes."""

from __future__ import annotations

import re
from datetime import date

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Connection

from backend.storage.database import Database
from backend.storage.migrate import migrate
from backend.storage.tables import metadata
from backend.storage.usage import UsageDay, UsageRepository, add_usage
from tests.storage.test_migration_0004 import upgrade_to

DAY = date(2026, 12, 2)


async def test_a_usage_day_from_before_0006_reads_zero_cache_tokens_and_adds_on(
    database_url: str,
) -> None:
    database = Database(database_url)
    try:
        async with database.engine.begin() as conn:
            await conn.run_sync(upgrade_to, "0005")
            await conn.execute(
                text(
                    "INSERT INTO usage (tenant_id, day, turns, prompt_tokens, "
                    "completion_tokens, summarizer_tokens) VALUES ('acme', :day, 3, 900, 60, 40)"
                ),
                {"day": DAY},
            )
        await migrate(database)
        usage = UsageRepository(database)
        (before,) = await usage.days(tenant_id="acme", since=DAY)
        await database.run_write(
            add_usage, UsageDay("acme", DAY, turns=1, prompt_tokens=100, cached_tokens=80)
        )
        (after,) = await usage.days(tenant_id="acme", since=DAY)
    finally:
        await database.dispose()
    assert before == UsageDay("acme", DAY, 3, 900, 60, 40, cached_tokens=0, cache_write_tokens=0)
    assert after == UsageDay("acme", DAY, 4, 1000, 60, 40, cached_tokens=80, cache_write_tokens=0)


async def test_the_migrated_schema_matches_the_tables(database_url: str) -> None:
    """What the migrations build is what the tables define, which an empty database is
    given directly (`migrate.py`)."""
    database = Database(database_url)
    try:
        async with database.engine.begin() as conn:
            await conn.run_sync(upgrade_to, "head")
        async with database.engine.connect() as conn:
            differences = await conn.run_sync(_differences)
    finally:
        await database.dispose()
    assert differences == []


def _differences(connection: Connection) -> list[object]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "compare_server_default": _defaults_differ}
    )
    return list(compare_metadata(context, metadata))


def _defaults_differ(
    context: object,
    inspected_column: object,
    metadata_column: object,
    inspected: str | None,
    metadata_default: object,
    rendered: str | None,
) -> bool:
    """Server defaults compared as written, whatever quotes, brackets or cast the database
    reflects them with ('0'::bigint, ('') and the like)."""
    return _plain(inspected) != _plain(rendered)


def _plain(default: str | None) -> str | None:
    return None if default is None else re.sub(r"::[\w ]+$", "", default).strip("()'\"")
