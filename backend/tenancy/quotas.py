"""Per-tenant limits: requests per minute (a sliding window) and tokens per UTC day.

Both answer 429 with `Retry-After`. The request window lives in this process (several
workers each allow the limit); the token count comes from the `usage` table, so it is shared.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from backend.errors import TallyError
from backend.storage.usage import UsageRepository

WINDOW_S = 60.0


class RateLimited(TallyError):
    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after: float, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class RequestRateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}

    def admit(self, tenant_id: str, *, per_minute: int | None) -> None:
        """Count one request, or raise RateLimited when the last minute is full."""
        if per_minute is None:
            return
        now = self._clock()
        recent = self._recent.setdefault(tenant_id, deque())
        while recent and recent[0] <= now - WINDOW_S:
            recent.popleft()
        if len(recent) >= per_minute:
            retry_after = max(recent[0] + WINDOW_S - now, 0.001)
            raise RateLimited(
                f"more than {per_minute} requests in a minute; retry in {math.ceil(retry_after)} s",
                retry_after=retry_after,
            )
        recent.append(now)


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
