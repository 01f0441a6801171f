"""One bot's delivered updates, whatever the platform: each is recorded (deduplicated by the
platform's id for it) before the platform is told we have it, then answered in the background,
once; after a crash, the recorded but unanswered ones are answered at the next start.

With several processes, any of them may receive a bot's updates (webhooks, callbacks): each
answers what it received, holding a lease renewed while it works, and every lease period each
sweeps for unanswered updates whose lease ran out (their process died) and claims them.

A platform's channel says what an update asks (`Handle`), and when the bot is ready to answer
(`open`): an update delivered while the bot is still connecting waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from backend.channels.base import ChannelStatus, note_refused
from backend.channels.context import ChannelServices
from backend.metrics.registry import CHANNEL_EVENTS
from backend.storage.channel_updates import ChannelUpdate, UpdateOutcome

log = logging.getLogger(__name__)

# How long a stop lets replies in hand finish; unfinished ones resume at the next start. Short
# enough that a server with a hung platform still shuts down in well under ten seconds.
STOP_GRACE_S = 5.0

# (platform id, payload, chunks of its reply already sent) → what became of the update
Handle = Callable[[str, dict[str, Any], int], Awaitable[UpdateOutcome]]
OnError = Callable[[str, BaseException], None]


class Inbox:
    def __init__(
        self,
        *,
        status: ChannelStatus,
        services: ChannelServices,
        handle: Handle,
        platform_errors: tuple[type[BaseException], ...],
        on_error: OnError,
    ) -> None:
        self._status = status
        self._services = services
        self._handle = handle
        self._platform_errors = platform_errors  # the platform failed us: noted, not a bug
        self._on_error = on_error
        self._lease_s = services.update_lease_s
        self._tasks: dict[str, asyncio.Task[None]] = {}  # by platform id
        self._chat_locks: dict[str, asyncio.Lock] = {}
        self._open = asyncio.Event()
        self._upkeep: asyncio.Task[None] | None = None

    async def unanswered(self) -> list[ChannelUpdate]:
        """Updates an earlier process kept and did not answer, now claimed by this one: read
        before any new one can arrive, so one that arrives meanwhile is in hand."""
        return await self._services.updates.claim_unanswered(
            tenant_id=self._status.tenant_id, bot=self._status.bot, lease_s=self._lease_s
        )

    def open(self, unanswered: list[ChannelUpdate]) -> None:
        """The bot can answer now: first the updates kept before a crash, then new ones."""
        self._resume(unanswered)
        self._open.set()
        self._upkeep = asyncio.create_task(self._keep_up(), name=f"inbox {self._status.bot}")

    async def keep(self, platform_id: str, payload: dict[str, Any]) -> bool:
        """Record a delivered update and answer it in the background; False for a duplicate
        (answered, or being answered, already). Storage faults propagate: the platform is then
        not told we have it, and delivers it again."""
        is_new = await self._services.updates.record(
            tenant_id=self._status.tenant_id,
            bot=self._status.bot,
            platform_id=platform_id,
            payload=payload,
            lease_s=self._lease_s,
        )
        self._status.last_update_at = datetime.now(UTC)
        CHANNEL_EVENTS.labels(self._status.tenant_id, self._status.bot, "update").inc()
        log.info(
            "%s %s: update in%s",
            self._status.kind,
            self._status.bot,
            "" if is_new else " (a duplicate: answered once)",
            extra={
                "tenant": self._status.tenant_id,
                "bot": self._status.bot,
                "update": platform_id,
            },
        )
        if is_new:
            self._schedule(platform_id, payload, 0)
        return is_new

    async def refuse(self, platform_id: str, payload: dict[str, Any], reason: str) -> None:
        """Record an update the bot cannot read as refused (once), so the platform can be told
        we have it and stops delivering it again; one warning line, and the bot's status says
        so. Storage faults propagate, as for `keep`."""
        is_new = await self._services.updates.record_refused(
            tenant_id=self._status.tenant_id,
            bot=self._status.bot,
            platform_id=platform_id,
            payload=payload,
            reason=reason,
        )
        self._status.last_update_at = datetime.now(UTC)
        if is_new:
            note_refused(self._status, platform_id, reason)

    def chat_lock(self, chat: str) -> asyncio.Lock:
        """Held while a turn of `chat` is answered: one chat's messages are answered in order."""
        return self._chat_locks.setdefault(chat, asyncio.Lock())

    async def settle(self) -> None:
        """Until every update in hand is answered (tests, and a graceful stop)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self, grace: float = STOP_GRACE_S) -> None:
        """Give replies in hand `grace` seconds, then cancel the rest (they resume later)."""
        if self._upkeep is not None:
            self._upkeep.cancel()
            await asyncio.gather(self._upkeep, return_exceptions=True)
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks.values(), timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _keep_up(self) -> None:
        """Renew the leases of the updates in hand a few times per lease; once per lease, take
        over what a dead process left."""
        every_s = self._lease_s / 3
        beats = 0
        while True:
            await asyncio.sleep(every_s)
            beats += 1
            try:
                await self._services.updates.renew(
                    tenant_id=self._status.tenant_id,
                    bot=self._status.bot,
                    platform_ids=list(self._tasks),
                    lease_s=self._lease_s,
                )
                if beats % 3 == 0:
                    self._resume(await self.unanswered())
            except Exception as exc:  # a storage fault: the next beat tries again
                log.warning(
                    "%s %s: inbox upkeep failed: %s", self._status.kind, self._status.bot, exc
                )

    def _resume(self, updates: list[ChannelUpdate]) -> None:
        for update in updates:
            if update.platform_id not in self._tasks:
                self._schedule(update.platform_id, update.payload, update.chunks_sent)

    def _schedule(self, platform_id: str, payload: dict[str, Any], chunks_sent: int) -> None:
        task = asyncio.create_task(self._answer(platform_id, payload, chunks_sent))
        self._tasks[platform_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(platform_id, None))

    async def _answer(self, platform_id: str, payload: dict[str, Any], chunks_sent: int) -> None:
        await self._open.wait()
        error: str | None = None
        try:
            outcome = await self._handle(platform_id, payload, chunks_sent)
        except self._platform_errors as exc:
            self._on_error("reply", exc)
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # logged with the update, never lost silently
            log.exception(
                "%s %s: update %s failed", self._status.kind, self._status.bot, platform_id
            )
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"
        await self._services.updates.finish(
            tenant_id=self._status.tenant_id,
            bot=self._status.bot,
            platform_id=platform_id,
            status=outcome,
            error=error,
        )
