"""Usage accounting per tenant and UTC day: turns, prompt, completion and summarizer tokens,
and the prompt tokens read from and written to the vendor's prompt cache (counted in
`prompt_tokens` too, so totals and quotas do not add them again).

Each turn's usage is added inside the transaction that stores its reply, with an upsert, so
accounting costs no extra commit and is never lost or counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from backend.storage.database import Database
from backend.storage.tables import usage

COUNTERS = (
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "summarizer_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "summarizer_calls",
    "cost_micros",
    "unpriced_calls",
)


@dataclass(frozen=True, slots=True)
class UsageDay:
    tenant_id: str
    day: date
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    summarizer_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens: read from the prompt cache
    cache_write_tokens: int = 0  # of prompt_tokens: written to the prompt cache
    summarizer_calls: int = 0  # ranges of evicted messages summarized
    cost_micros: int = 0  # estimated, in millionths of `pricing.currency` (settings/pricing.py)
    unpriced_calls: int = 0  # turns and summaries of a model without a price: not in the cost

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens + self.summarizer_tokens


def _upsert(dialect: Any) -> Any:
    """The upsert adding a day's counters, for `dialect`'s INSERT … ON CONFLICT."""
    statement = dialect.insert(usage)
    return statement.on_conflict_do_update(
        index_elements=[usage.c.tenant_id, usage.c.day],
        set_={name: usage.c[name] + statement.excluded[name] for name in COUNTERS},
    )


# Built once per dialect: each turn passes only its values (see messages.py).
_UPSERTS = {"postgresql": _upsert(postgresql), "sqlite": _upsert(sqlite)}


def add_usage(conn: Connection, delta: UsageDay) -> None:
    """Add `delta` to its tenant's day, inside the caller's write transaction."""
    values = {"tenant_id": delta.tenant_id, "day": delta.day}
    values.update({name: getattr(delta, name) for name in COUNTERS})
    conn.execute(_UPSERTS[conn.dialect.name], values)


class UsageRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def days(self, *, tenant_id: str | None, since: date) -> list[UsageDay]:
        """Days from `since` on, newest first; every tenant when `tenant_id` is None (the
        operator's view)."""
        query = select(usage).where(usage.c.day >= since)
        if tenant_id is not None:
            query = query.where(usage.c.tenant_id == tenant_id)
        async with self._db.read() as conn:
            rows = await conn.execute(query.order_by(usage.c.day.desc(), usage.c.tenant_id))
            return [
                UsageDay(row.tenant_id, row.day, *(getattr(row, name) for name in COUNTERS))
                for row in rows
            ]

    async def tokens_on(self, *, tenant_id: str, day: date) -> int:
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(usage).where(usage.c.tenant_id == tenant_id, usage.c.day == day)
                )
            ).first()
        if row is None:
            return 0
        return int(row.prompt_tokens + row.completion_tokens + row.summarizer_tokens)
