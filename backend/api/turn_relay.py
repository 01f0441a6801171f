"""A streaming turn of `/api/chat/send`, relayed to whoever reads it: the client that sent the
message, and any client that reconnects with `Last-Event-ID` (`GET /api/chat/turns/{id}/events`)
on this process or, through the coordinator's journal, on another.

Events are numbered from 1 (the SSE `id:`) and kept until `KEPT_AFTER_END_S` after the turn
ends. A client going away does not cancel the turn at once: it runs on for
`server.sse_resume_s`, and is cancelled then unless a reader came back, here or elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from backend.api.sse import encode_event, event_text
from backend.coordination.base import CoordinationUnavailable
from backend.coordination.journal import (
    KEPT_AFTER_END_S,
    MAX_READ_WAIT_S,
    RENEW_S,
    JournalEntry,
    TurnJournal,
)
from backend.domain.events import TurnCompleted, TurnEvent, TurnFailed

log = logging.getLogger(__name__)

LOST = TurnFailed(
    "turn_lost",
    "the process running this turn stopped before it ended; the words so far are stored "
    "with the session's messages",
    status=503,
)


class TurnRelay:
    """One turn's numbered events, as this process produced them."""

    def __init__(self, tenant_id: str, turn_id: str, cancel: Callable[[], None]) -> None:
        self.tenant_id = tenant_id
        self.turn_id = turn_id
        self.cancel = cancel
        self.entries: list[JournalEntry] = []
        self.readers = 0
        self.ended = asyncio.Event()
        self._grown = asyncio.Event()

    def append(self, event: TurnEvent) -> None:
        seq = len(self.entries) + 1
        is_final = isinstance(event, TurnCompleted | TurnFailed)
        self.entries.append(JournalEntry(seq, event_text(event, seq), is_final))
        self._wake()

    def end(self) -> None:
        self.ended.set()
        self._wake()

    async def wait_past(self, seq: int, timeout_s: float | None = None) -> None:
        """Until there is an entry after `seq`, the turn ended, or `timeout_s` passed."""
        if len(self.entries) > seq or self.ended.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._grown.wait(), timeout_s)

    async def follow(self, after: int) -> AsyncGenerator[bytes, None]:
        """The events after `after`, as they come, until the last."""
        self.readers += 1
        try:
            seq = after
            while True:
                while seq < len(self.entries):
                    seq += 1
                    yield self.entries[seq - 1].chunk.encode()
                if self.ended.is_set():
                    return
                await self.wait_past(seq)
        finally:
            self.readers -= 1

    def _wake(self) -> None:
        self._grown.set()
        self._grown = asyncio.Event()


class TurnRelays:
    """This process's relayed turns, by tenant and turn id."""

    def __init__(self, journal: TurnJournal, *, resume_s: float, is_shared: bool) -> None:
        self._journal = journal
        self._resume_s = resume_s
        self._is_shared = is_shared  # other processes may read: publish to the journal
        self._relays: dict[tuple[str, str], TurnRelay] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def start(
        self,
        tenant_id: str,
        turn_id: str,
        events: AsyncGenerator[TurnEvent, None],
        cancel: Callable[[], None],
    ) -> TurnRelay:
        """Relay `events` (the turn's, its first already taken and given back by the caller
        through `events`) from now on, whether or not anyone reads."""
        relay = TurnRelay(tenant_id, turn_id, cancel)
        self._relays[(tenant_id, turn_id)] = relay  # a retried turn keeps its id: newest wins
        self._spawn(self._feed(relay, events), f"relay {turn_id}")
        if self._is_shared:
            self._spawn(self._publish(relay), f"journal {turn_id}")
        return relay

    def find(self, tenant_id: str, turn_id: str) -> TurnRelay | None:
        return self._relays.get((tenant_id, turn_id))

    def client_gone(self, relay: TurnRelay) -> None:
        """The client that sent the message went away: cancel unless someone reads again."""
        if self._resume_s == 0:
            relay.cancel()
        else:
            self._spawn(self._cancel_unless_resumed(relay), f"resume wait {relay.turn_id}")

    async def follow_elsewhere(
        self, tenant_id: str, turn_id: str, *, after: int
    ) -> AsyncGenerator[bytes, None] | None:
        """The events after `after` of a turn another process runs, from the journal; None
        when no process journals it."""
        first = await self._journal.read(tenant_id, turn_id, after=after, wait_s=0)
        if first is None:
            return None
        return self._from_journal(tenant_id, turn_id, after, first)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _feed(self, relay: TurnRelay, events: AsyncGenerator[TurnEvent, None]) -> None:
        try:
            async for event in events:
                relay.append(event)
        finally:
            await events.aclose()
            relay.end()
            key = (relay.tenant_id, relay.turn_id)
            asyncio.get_running_loop().call_later(KEPT_AFTER_END_S, self._drop, key, relay)

    def _drop(self, key: tuple[str, str], relay: TurnRelay) -> None:
        if self._relays.get(key) is relay:
            del self._relays[key]

    async def _publish(self, relay: TurnRelay) -> None:
        """Copy the relay's entries to the journal as they come, in batches."""
        sent, is_warned = 0, False
        while True:
            is_ended = relay.ended.is_set()
            batch = relay.entries[sent:]
            keep_s = KEPT_AFTER_END_S if is_ended else RENEW_S * 3
            try:
                await self._journal.publish(relay.tenant_id, relay.turn_id, batch, keep_s=keep_s)
            except CoordinationUnavailable as exc:  # the turn goes on; only a reconnect
                if not is_warned:  # elsewhere misses it (the 503 of follow_elsewhere)
                    log.warning("turn events not shared: %s", exc.message)
                    is_warned = True
                if is_ended:
                    return
                await relay.wait_past(len(relay.entries), RENEW_S)
                continue
            sent += len(batch)
            if is_ended:
                return
            await relay.wait_past(sent, RENEW_S)

    async def _cancel_unless_resumed(self, relay: TurnRelay) -> None:
        while True:
            try:
                await asyncio.wait_for(relay.ended.wait(), self._resume_s)
                return
            except TimeoutError:
                pass
            if relay.readers == 0 and not await self._is_watched_elsewhere(relay):
                log.info("turn cancelled: its client went away and did not come back")
                relay.cancel()
                return

    async def _is_watched_elsewhere(self, relay: TurnRelay) -> bool:
        if not self._is_shared:
            return False
        try:
            return await self._journal.is_watched(relay.tenant_id, relay.turn_id)
        except CoordinationUnavailable:
            return False  # nobody elsewhere can read it either

    async def _from_journal(
        self, tenant_id: str, turn_id: str, after: int, entries: list[JournalEntry]
    ) -> AsyncGenerator[bytes, None]:
        marked_at = -float("inf")
        while True:
            for entry in entries:
                if entry.seq > after:  # the final entry comes again to a reader past it
                    yield entry.chunk.encode()
                    after = entry.seq
                if entry.is_final:
                    return
            if time.monotonic() - marked_at >= self._resume_s / 3:
                # Watched for longer than a read can block: the owner never sees a gap.
                watch_s = self._resume_s + MAX_READ_WAIT_S
                await self._journal.mark_watched(tenant_id, turn_id, for_s=watch_s)
                marked_at = time.monotonic()
            read = await self._journal.read(tenant_id, turn_id, after=after, wait_s=RENEW_S)
            if read is None:  # nobody renews it: its process stopped mid-turn
                yield encode_event(LOST)
                return
            entries = read

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
