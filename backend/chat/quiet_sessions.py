"""Sessions that went quiet have their tails distilled: what was said since memory last took
it in would otherwise reach other sessions only once the window overflowed or 30 more messages
came, and a conversation that ends never gets either. A sweep each `every_s` hands each quiet
session to its tenant's overflow worker, which waits for the tenant's own `quiet_after_s`.
With several workers each sweeps; the journal takes each range once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from backend.chat.runtime import RuntimeRegistry
from backend.storage.sessions import SessionRepository

log = logging.getLogger(__name__)

SHORTEST_QUIET = timedelta(seconds=60)  # sessions quiet for less are never looked at
BATCH = 200  # sessions handed over per sweep; the rest wait for the next sweep


class QuietSessions:
    def __init__(
        self,
        sessions: SessionRepository,
        runtimes: RuntimeRegistry,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._sessions = sessions
        self._runtimes = runtimes
        self._clock = clock
        self._sweeps: asyncio.Task[None] | None = None

    async def sweep(self) -> int:
        """Hand every session quiet for its tenant's `quiet_after_s` to its overflow worker;
        how many were handed over."""
        now = self._clock()
        handed = 0
        for session in await self._sessions.quiet_with_tail(
            since=now - SHORTEST_QUIET, limit=BATCH
        ):
            runtime = await self._runtimes.get(session.tenant_id)
            quiet_after = runtime.settings.memory.distill_quiet_after_s
            if quiet_after is not None and session.updated_at <= now - timedelta(
                seconds=quiet_after
            ):
                runtime.overflow.distill_tail(session)
                handed += 1
        return handed

    def sweep_every(self, seconds: float) -> None:
        self._sweeps = asyncio.create_task(self._sweep_forever(seconds), name="quiet sessions")

    async def aclose(self) -> None:
        if self._sweeps is not None:
            self._sweeps.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeps

    async def _sweep_forever(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await self.sweep()
            except Exception as exc:  # a storage fault: the next sweep tries again
                log.warning("quiet-session sweep failed: %s", exc)
