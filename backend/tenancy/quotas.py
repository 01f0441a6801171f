"""Per-tenant limits: requests per minute (a moving window) and tokens per UTC day.

Both answer 429 with `Retry-After`. The request window is the `limits` library's, kept where
the coordinator says (in memory for one process, in Redis for several, exact across them); the
token count comes from the `usage` table, so it is shared too.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from limits import RateLimitItemPerMinute
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from backend.errors import TallyError
from backend.storage.usage import UsageRepository

log = logging.getLogger(__name__)


class RateLimited(TallyError):
    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after: float, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class RequestRateLimiter:
    def __init__(self, storage: Storage) -> None:
        self._limiter = MovingWindowRateLimiter(storage)

    async def admit(self, tenant_id: str, *, per_minute: int | None) -> None:
        """Count one request, or raise RateLimited when the last minute is full. Counting that
        cannot be done (Redis unreachable) admits the request: the limit guards cost, and
        health says coordination is down."""
        if per_minute is None:
            return
        limit = RateLimitItemPerMinute(per_minute)
        try:
            if await self._limiter.hit(limit, "tally.requests", tenant_id):
                return
            stats = await self._limiter.get_window_stats(limit, "tally.requests", tenant_id)
        except (StorageError, OSError) as exc:
            log.warning("requests-per-minute not counted: %s", exc, extra={"tenant": tenant_id})
            return
        retry_after = max(stats.reset_time - time.time(), 0.001)
        raise RateLimited(
            f"more than {per_minute} requests in a minute; retry in {math.ceil(retry_after)} s",
            retry_after=retry_after,
        )


class TokenQuota:
    def __init__(
        self, usage: UsageRepository, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self._usage = usage
        self._clock = clock

    async def check(self, tenant_id: str, *, per_day: int | None) -> None:
        """Raise RateLimited (`token_quota_exceeded`) once today's tokens reach the quota."""
        if per_day is None:
            return
        now = self._clock()
        used = await self._usage.tokens_on(tenant_id=tenant_id, day=now.date())
        if used >= per_day:
            midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
            raise RateLimited(
                f"today's token quota ({per_day}) is used up; it renews at 00:00 UTC",
                retry_after=(midnight - now).total_seconds(),
                code="token_quota_exceeded",
            )
