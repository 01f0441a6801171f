"""A turn ends when its key is revoked or its tenant disabled while it runs.

The turn is cancelled like any other (the words already produced are stored `incomplete`, the
user message stays stored once), and its final event becomes `unauthorized` (401) instead of
`cancelled` (`tenant_disabled`, 403, when its tenant was disabled): a stream ends with an
`error` event of that code, a JSON turn with that status. The key
row is re-read every `auth.revocation_check_s` seconds, the way that holds across processes
sharing the database, and at once when this process revokes the key or disables the tenant.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends

from backend.api.auth import PrincipalDep
from backend.api.deps import ServicesDep
from backend.chat.turn_handle import TurnHandle
from backend.domain.events import TurnCompleted, TurnEvent, TurnFailed
from backend.errors import TallyError, TenantDisabled, TurnCancelled
from backend.tenancy.keys import Authenticator, Principal

log = logging.getLogger(__name__)

REVOKED = "the API key is no longer valid: the turn was stopped"
DISABLED = "the tenant was disabled: the turn was stopped"


@dataclass(frozen=True, slots=True)
class KeyWatch:
    """The key a turn runs under, and how to learn that it stopped working."""

    authenticator: Authenticator
    principal: Principal
    every_s: float

    async def wait_until_revoked(self) -> TallyError:
        return await self.authenticator.wait_until_revoked(self.principal, every_s=self.every_s)


async def key_watch(services: ServicesDep, principal: PrincipalDep) -> KeyWatch | None:
    """None where no key row can be revoked (auth.mode none, the operator's key)."""
    if principal.key_id is None:
        return None
    every_s = services.settings.auth.revocation_check_s
    return KeyWatch(services.authenticator, principal, every_s)


KeyWatchDep = Annotated[KeyWatch | None, Depends(key_watch)]


def _is_revoked(watcher: asyncio.Task[TallyError]) -> bool:
    return watcher.done() and not watcher.cancelled() and watcher.exception() is None


def _revoked_failure(event: TurnFailed, refusal: TallyError) -> TurnFailed:
    """The cancelled turn's end, as the reason its key stopped working."""
    message = DISABLED if isinstance(refusal, TenantDisabled) else REVOKED
    return TurnFailed(
        code=refusal.code,
        message=message,
        status=refusal.status,
        incomplete_message_id=event.incomplete_message_id,
    )


async def events_until_revoked(
    handle: TurnHandle, watch: KeyWatch | None
) -> AsyncGenerator[TurnEvent, None]:
    """The turn's events; once the key is revoked the turn is cancelled and its final
    `cancelled` event is reported as `unauthorized`."""
    if watch is None:
        async for event in handle.events():
            yield event
        return
    watcher = asyncio.create_task(watch.wait_until_revoked(), name=f"key watch {handle.turn_id}")

    def cancel_if_revoked(task: asyncio.Task[TallyError]) -> None:
        if _is_revoked(task):
            handle.cancel()

    watcher.add_done_callback(cancel_if_revoked)
    try:
        async for event in handle.events():
            is_revoked = _is_revoked(watcher)
            if is_revoked and isinstance(event, TurnFailed) and event.code == TurnCancelled.code:
                log.info("turn stopped: its API key stopped working", extra=handle.log_fields())
                event = _revoked_failure(event, watcher.result())
            elif is_revoked and not isinstance(event, TurnCompleted | TurnFailed):
                handle.cancel()  # again: the first may have come before the model call began
            yield event
    finally:
        watcher.cancel()


async def result_unless_revoked(
    handle: TurnHandle, watch: KeyWatch | None
) -> TurnCompleted | TurnFailed:
    """The turn's final event, as `handle.result()`, with revocation ending the turn."""
    events = events_until_revoked(handle, watch)
    try:
        async for event in events:
            if isinstance(event, TurnCompleted | TurnFailed):
                return event
    finally:
        await events.aclose()
    raise AssertionError("a turn always ends with TurnCompleted or TurnFailed")
