"""A platform's access token: fetched once however many replies need it at the same moment,
fetched again shortly before the platform says it expires, or at once when the platform
refuses it (revoked, or expired early)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

# The token and how many seconds the platform says it lasts.
Fetch = Callable[[], Awaitable[tuple[str, float]]]


class AccessToken:
    def __init__(
        self, fetch: Fetch, *, early_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fetch = fetch
        self._early_s = early_s
        self._clock = clock
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = asyncio.Lock()  # one fetch when many replies need a token at once

    async def get(self) -> str:
        async with self._lock:
            if self._token is None or self._clock() >= self._renew_at:
                token, lifetime_s = await self._fetch()
                self._token = token
                self._renew_at = self._clock() + max(lifetime_s - self._early_s, 0)
            return self._token

    def forget(self, refused: str | None = None) -> None:
        """The platform refused the token (`refused`, when the caller knows which): the next
        `get` fetches another, unless one fetched since has replaced the refused one."""
        if refused is None or refused == self._token:
            self._token = None
