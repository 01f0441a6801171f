"""Usage accounting: each turn's counters, prompt-cache tokens included, add up per tenant and
UTC day."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date

import pytest

from backend.storage.database import Database
from backend.storage.migrate import migrate
from backend.storage.usage import UsageDay, UsageRepository, add_usage

DAY = date(2026, 12, 3)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(database_url)
    await migrate(db)
    yield db
    await db.dispose()


async def test_two_turns_of_a_day_add_up_their_cache_tokens(database: Database) -> None:
    turns = [
        UsageDay(
            "acme", DAY, turns=1, prompt_tokens=2000, completion_tokens=10, cache_write_tokens=1800
        ),
        UsageDay(
            "acme", DAY, turns=1, prompt_tokens=2100, completion_tokens=20, cached_tokens=1800
        ),
        UsageDay("globex", DAY, turns=1, prompt_tokens=50, cached_tokens=7),
    ]
    for turn in turns:
        await database.run_write(add_usage, turn)
    usage = UsageRepository(database)
    (acme,) = await usage.days(tenant_id="acme", since=DAY)
    assert acme == UsageDay(
        "acme",
        DAY,
        turns=2,
        prompt_tokens=4100,
        completion_tokens=30,
        cached_tokens=1800,
        cache_write_tokens=1800,
    )
    # Cache tokens are counted in prompt_tokens already: the quota does not add them again.
    assert acme.total_tokens == await usage.tokens_on(tenant_id="acme", day=DAY) == 4130
    assert [d.cached_tokens for d in await usage.days(tenant_id=None, since=DAY)] == [1800, 7]
