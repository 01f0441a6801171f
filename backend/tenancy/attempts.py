"""Attempts at guessing something (a link code) limited per source: at most `attempts` in a
moving window of `per_s` seconds for each name (an API key, a chat), counted where the
coordinator keeps rate limits (in memory for one process, in Redis across processes), so no
source guesses faster by spreading its tries over workers.

Every attempt is counted (atomically) before it is checked, good or not: concurrent guesses
cannot slip past the limit while the first ones are being checked, and a person who typed the
right code used one try of the allowance.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

from limits import RateLimitItemPerSecond
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from backend.tenancy.quotas import RateLimited

log = logging.getLogger(__name__)


class AttemptLimiter:
    def __init__(self, storage: Storage, *, what: str, attempts: int, per_s: int) -> None:
        self._limiter = MovingWindowRateLimiter(storage)
        self._limit = RateLimitItemPerSecond(attempts, per_s)
        self._what = what  # "link code": named in the refusal
        self.attempts = attempts
        self.per_s = per_s

    async def count(self, tenant_id: str, names: Sequence[str]) -> None:
        """Count one attempt from each of `names`, or raise RateLimited when one of them has
        used its allowance. Counting that cannot be done (Redis down) lets the attempt through:
        the secret's size is the defence, the limit its margin."""
        namespace = f"tally.attempts.{self._what}"
        try:
            for name in names:
                if not await self._limiter.hit(self._limit, namespace, tenant_id, name):
                    stats = await self._limiter.get_window_stats(
                        self._limit, namespace, tenant_id, name
                    )
                    raise self._refusal(max(stats.reset_time - time.time(), 1.0))
        except (StorageError, OSError) as exc:
            log.warning("%s attempts not counted: %s", self._what, exc, extra={"tenant": tenant_id})

    def _refusal(self, retry_after: float) -> RateLimited:
        minutes = math.ceil(retry_after / 60)
        wait = f"{minutes} minute{'s' if minutes > 1 else ''}"
        return RateLimited(
            f"too many {self._what}s were tried from here ({self.attempts} in "
            f"{self.per_s // 60} minutes); try again in {wait}",
            retry_after=retry_after,
            code="too_many_attempts",
        )
