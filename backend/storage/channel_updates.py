"""The updates chat platforms delivered: recorded before they are acknowledged, deduplicated
by (tenant, bot, platform id), and marked when answered, so a crash loses none and answers
none twice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from backend.storage.database import Database
from backend.storage.tables import channel_updates

Finished = Literal["answered", "ignored", "failed"]


@dataclass(frozen=True, slots=True)
class ChannelUpdate:
    platform_id: str
    payload: dict[str, Any]
    chunks_sent: int  # of its reply, already delivered before a crash


class ChannelUpdateRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def record(
        self, *, tenant_id: str, bot: str, platform_id: str, payload: dict[str, Any]
    ) -> bool:
        """Keep the update; False when it was delivered before (a duplicate)."""
        try:
            async with self._db.write() as conn:
                await conn.execute(
                    channel_updates.insert().values(
                        tenant_id=tenant_id,
                        bot=bot,
                        platform_id=platform_id,
                        payload=payload,
                        status="received",
                        chunks_sent=0,
                        received_at=datetime.now(UTC),
                    )
                )
        except IntegrityError:
            return False
        return True

    async def unanswered(self, *, tenant_id: str, bot: str) -> list[ChannelUpdate]:
        """The updates received but not finished (a previous process crashed), in order."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(channel_updates)
                .where(
                    channel_updates.c.tenant_id == tenant_id,
                    channel_updates.c.bot == bot,
                    channel_updates.c.status == "received",
                )
                .order_by(channel_updates.c.id)
            )
            return [ChannelUpdate(r.platform_id, r.payload, r.chunks_sent) for r in rows]

    async def count_sent(self, *, tenant_id: str, bot: str, platform_id: str, chunks: int) -> None:
        await self._update(tenant_id, bot, platform_id, chunks_sent=chunks)

    async def finish(
        self,
        *,
        tenant_id: str,
        bot: str,
        platform_id: str,
        status: Finished,
        error: str | None = None,
    ) -> None:
        await self._update(
            tenant_id, bot, platform_id, status=status, error=error, finished_at=datetime.now(UTC)
        )

    async def _update(self, tenant_id: str, bot: str, platform_id: str, **values: Any) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                update(channel_updates)
                .where(
                    channel_updates.c.tenant_id == tenant_id,
                    channel_updates.c.bot == bot,
                    channel_updates.c.platform_id == platform_id,
                )
                .values(**values)
            )
