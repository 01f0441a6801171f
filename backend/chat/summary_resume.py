"""Summaries left unfinished are finished: at start, every one a previous process left; with
several workers, also every one whose worker died, once its lease runs out (a sweep each lease
period, so at most two lease periods later). Claiming a job lets exactly one worker take it."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from backend.chat.runtime import RuntimeRegistry
from backend.storage.overflow_jobs import OverflowJobRepository

log = logging.getLogger(__name__)


class SummaryResumer:
    def __init__(self, jobs: OverflowJobRepository, runtimes: RuntimeRegistry) -> None:
        self._jobs = jobs
        self._runtimes = runtimes
        self._sweeps: asyncio.Task[None] | None = None

    async def resume(self, *, unleased: bool = False) -> None:
        """Pick up the unfinished summaries (`unleased`: those no live worker holds)."""
        for tenant_id, session_id in await self._jobs.sessions_with_active_jobs(unleased=unleased):
            runtime = await self._runtimes.get(tenant_id)
            runtime.overflow.resume_session(tenant_id, session_id)

    def sweep_every(self, seconds: float) -> None:
        self._sweeps = asyncio.create_task(self._sweep(seconds), name="summary sweeps")

    async def aclose(self) -> None:
        if self._sweeps is not None:
            self._sweeps.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeps

    async def _sweep(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await self.resume(unleased=True)
            except Exception as exc:  # a storage fault: the next sweep tries again
                log.warning("summary sweep failed: %s", exc)
