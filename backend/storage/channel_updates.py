"""The updates chat platforms delivered: recorded before they are acknowledged, deduplicated
by (tenant, bot, platform id), and marked when answered, so a crash loses none and answers
none twice. The process answering an update holds a lease on it, renewed while it works: with
several processes, an unanswered update whose lease ran out is a dead process's, and exactly
one other process claims it. An update the bot cannot read is recorded as `refused`, with why,
so the platform can be told we have it (and stop retrying) and an operator can see it. A
platform's proof that covers no body (DingTalk's callback signature) is kept too, with the
update it came with (status `proof`), so it cannot carry another."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from backend.domain.text import storable_object, storable_text
from backend.storage.database import Database
from backend.storage.tables import channel_updates

# How a platform update ended; "refused" is recorded as it arrives, never as an outcome.
UpdateOutcome = Literal["answered", "ignored", "failed"]
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class ChannelUpdate:
    platform_id: str
    payload: dict[str, Any]
    chunks_sent: int  # of its reply, already delivered before a crash


class ChannelUpdateRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def record(
        self,
        *,
        tenant_id: str,
        bot: str,
        platform_id: str,
        payload: dict[str, Any],
        lease_s: float,
    ) -> bool:
        """Keep the update, leased to this process; False when it was delivered before (a
        duplicate)."""
        try:
            async with self._db.write() as conn:
                await conn.execute(
                    channel_updates.insert().values(
                        tenant_id=tenant_id,
                        bot=bot,
                        platform_id=platform_id,
                        payload=storable_object(payload),
                        status="received",
                        chunks_sent=0,
                        received_at=datetime.now(UTC),
                        leased_until=datetime.now(UTC) + timedelta(seconds=lease_s),
                    )
                )
        except IntegrityError:
            return False
        return True

    async def record_refused(
        self, *, tenant_id: str, bot: str, platform_id: str, payload: dict[str, Any], reason: str
    ) -> bool:
        """Keep an update the bot refused, finished at once; False when it was recorded before
        (the platform delivered it again)."""
        now = datetime.now(UTC)
        try:
            async with self._db.write() as conn:
                await conn.execute(
                    channel_updates.insert().values(
                        tenant_id=tenant_id,
                        bot=bot,
                        platform_id=platform_id,
                        payload=storable_object(payload),
                        status="refused",
                        chunks_sent=0,
                        error=storable_text(reason[:MAX_ERROR_CHARS]),
                        received_at=now,
                        finished_at=now,
                    )
                )
        except IntegrityError:
            return False
        return True

    async def claim_proof(self, *, tenant_id: str, bot: str, proof: str, platform_id: str) -> str:
        """Keep the first update that came with `proof` (a signature the platform computes
        without the body, so a captured one could carry another): the platform id it came
        with, which is `platform_id` unless another came first. One row per proof, claimed in
        one statement, so two processes offered it at the same moment agree on one."""
        name = "proof:" + hashlib.sha256(proof.encode()).hexdigest()[:40]
        now = datetime.now(UTC)
        try:
            async with self._db.write() as conn:
                await conn.execute(
                    channel_updates.insert().values(
                        tenant_id=tenant_id,
                        bot=bot,
                        platform_id=name,
                        payload={"platform_id": platform_id},
                        status="proof",
                        chunks_sent=0,
                        received_at=now,
                        finished_at=now,
                    )
                )
        except IntegrityError:
            async with self._db.read() as conn:
                row = (
                    await conn.execute(
                        select(channel_updates.c.payload).where(
                            channel_updates.c.tenant_id == tenant_id,
                            channel_updates.c.bot == bot,
                            channel_updates.c.platform_id == name,
                        )
                    )
                ).one()
            first = row.payload.get("platform_id") if isinstance(row.payload, dict) else None
            return str(first)
        return platform_id

    async def claim_unanswered(
        self, *, tenant_id: str, bot: str, lease_s: float
    ) -> list[ChannelUpdate]:
        """The updates received but not finished that no live process holds (it crashed), in
        order, each now leased to this process; another process's claim of one wins once."""
        now = datetime.now(UTC)
        free = channel_updates.c.leased_until.is_(None) | (channel_updates.c.leased_until < now)
        mine = (
            channel_updates.c.tenant_id == tenant_id,
            channel_updates.c.bot == bot,
            channel_updates.c.status == "received",
        )
        async with self._db.read() as conn:
            rows = list(
                await conn.execute(
                    select(channel_updates).where(*mine, free).order_by(channel_updates.c.id)
                )
            )
        claimed: list[ChannelUpdate] = []
        for row in rows:
            async with self._db.write() as conn:
                taken = await conn.execute(
                    update(channel_updates)
                    .where(channel_updates.c.id == row.id, *mine, free)
                    .values(leased_until=now + timedelta(seconds=lease_s))
                )
            if taken.rowcount == 1:
                payload = storable_object(row.payload)
                claimed.append(ChannelUpdate(row.platform_id, payload, row.chunks_sent))
        return claimed

    async def release_leases(self) -> None:
        """Free every lease: at start-up of the only process (SQLite), any lease is a crash's."""
        async with self._db.write() as conn:
            await conn.execute(
                update(channel_updates)
                .where(channel_updates.c.leased_until.is_not(None))
                .values(leased_until=None)
            )

    async def renew(
        self, *, tenant_id: str, bot: str, platform_ids: Collection[str], lease_s: float
    ) -> None:
        """Extend this process's leases on the updates it is answering (its heartbeat)."""
        if not platform_ids:
            return
        async with self._db.write() as conn:
            await conn.execute(
                update(channel_updates)
                .where(
                    channel_updates.c.tenant_id == tenant_id,
                    channel_updates.c.bot == bot,
                    channel_updates.c.platform_id.in_(list(platform_ids)),
                    channel_updates.c.status == "received",
                )
                .values(leased_until=datetime.now(UTC) + timedelta(seconds=lease_s))
            )

    async def count_sent(self, *, tenant_id: str, bot: str, platform_id: str, chunks: int) -> None:
        await self._update(tenant_id, bot, platform_id, chunks_sent=chunks)

    async def finish(
        self,
        *,
        tenant_id: str,
        bot: str,
        platform_id: str,
        status: UpdateOutcome,
        error: str | None = None,
    ) -> None:
        await self._update(
            tenant_id,
            bot,
            platform_id,
            status=status,
            error=None if error is None else storable_text(error[:MAX_ERROR_CHARS]),
            finished_at=datetime.now(UTC),
            leased_until=None,
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
