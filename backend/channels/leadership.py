"""One process at a time runs a bot's receiving side (Telegram's polling and webhook
registration, DingTalk's Stream connection): the leader, by a lock in the shared database.
The others wait, and one of them takes over within `RETRY_S` once the leader is gone; webhooks
and callbacks are served by every process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from backend.storage.database import Database
from backend.storage.locks import try_lead

log = logging.getLogger(__name__)

RETRY_S = 2.0


async def run_as_leader(
    database: Database | None,
    name: tuple[str, ...],
    work: Callable[[], Coroutine[Any, Any, None]],
    *,
    retry_s: float = RETRY_S,
) -> None:
    """`work()` while this process holds the lock `name`: started when it is won, cancelled
    when it is lost (the database dropped its connection), resumed when it is won again."""
    if database is None:
        await work()
        return
    while True:
        leadership = await try_lead(database, *name)
        if leadership is None:
            await asyncio.sleep(retry_s)
            continue
        log.info("leading %s", "/".join(name[1:]))
        task = asyncio.create_task(work())
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=retry_s)
                if not task.done() and not await leadership.is_held():
                    log.warning("lost the lead of %s", "/".join(name[1:]))
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    break
            else:
                task.result()  # work ended (or failed): so does leading
                return
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await leadership.release()
