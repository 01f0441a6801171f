"""The turn journal in Redis: one stream per turn, its entry ids `0-<seq>` so a reader's
`Last-Event-ID` is where XREAD starts; a key beside it, with an expiry, says a reader streams
the turn. Both go by themselves when nobody renews them (a process killed mid-turn included).
A lost Redis is CoordinationUnavailable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from backend.coordination.base import CoordinationUnavailable
from backend.coordination.journal import MAX_READ_WAIT_S, JournalEntry

READ_BATCH = 500
Rows = list[tuple[str, list[tuple[str, dict[str, str]]]]]


class RedisTurnJournal:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._redis = client
        self._prefix = prefix

    async def publish(
        self, tenant_id: str, turn_id: str, entries: Sequence[JournalEntry], *, keep_s: float
    ) -> None:
        key = self._key(tenant_id, turn_id)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                if entries and entries[0].seq == 1:
                    pipe.delete(key)
                for entry in entries:
                    fields = {"c": entry.chunk, "f": int(entry.is_final)}
                    pipe.xadd(key, fields, id=f"0-{entry.seq}")  # type: ignore[arg-type]
                pipe.pexpire(key, int(keep_s * 1000))
                await pipe.execute()
        except RedisError as exc:
            raise CoordinationUnavailable(f"Redis cannot keep the turn's events: {exc}") from exc

    async def read(
        self, tenant_id: str, turn_id: str, *, after: int, wait_s: float
    ) -> list[JournalEntry] | None:
        key = self._key(tenant_id, turn_id)
        block_ms = int(min(wait_s, MAX_READ_WAIT_S) * 1000)
        try:
            answer = await self._redis.xread(
                {key: f"0-{after}"}, count=READ_BATCH, block=block_ms or None
            )
            if not answer:  # nothing newer: the last entry says whether more will come
                last = await self._redis.xrevrange(key, count=1)
                if not last:
                    return None
                return [e for e in self._entries(last) if e.is_final]
        except RedisError as exc:
            raise CoordinationUnavailable(f"Redis cannot read the turn's events: {exc}") from exc
        # RESP2 with decode_responses: [[key, [(id, {field: value}), ...]]]
        _, rows = cast(Rows, answer)[0]
        return self._entries(rows)

    @staticmethod
    def _entries(rows: object) -> list[JournalEntry]:
        return [
            JournalEntry(int(row_id.split("-")[1]), fields["c"], fields["f"] == "1")
            for row_id, fields in cast(list[tuple[str, dict[str, str]]], rows)
        ]

    async def mark_watched(self, tenant_id: str, turn_id: str, *, for_s: float) -> None:
        try:
            await self._redis.set(self._watched_key(tenant_id, turn_id), 1, px=int(for_s * 1000))
        except RedisError as exc:
            raise CoordinationUnavailable(f"Redis cannot be reached: {exc}") from exc

    async def is_watched(self, tenant_id: str, turn_id: str) -> bool:
        try:
            return bool(await self._redis.exists(self._watched_key(tenant_id, turn_id)))
        except RedisError as exc:
            raise CoordinationUnavailable(f"Redis cannot be reached: {exc}") from exc

    def _key(self, tenant_id: str, turn_id: str) -> str:
        return f"{self._prefix}:turn:{tenant_id}:{turn_id}"

    def _watched_key(self, tenant_id: str, turn_id: str) -> str:
        return f"{self._key(tenant_id, turn_id)}:watched"
