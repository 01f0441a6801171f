"""A streaming turn's events, kept where another process can read them: a client whose SSE
connection dropped reconnects with `Last-Event-ID` wherever the load balancer sends it and gets
the rest of the turn, no token lost or repeated.

The process running the turn numbers its events from 1 and publishes them as they come; a
process serving a reconnect reads those after the client's last one, and marks the turn
watched while it streams, so the owner knows someone still reads and does not cancel the turn.
One process alone needs none of it (`LocalJournal`): its own reconnects read its own memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

KEPT_AFTER_END_S = 120.0  # a reconnect after the turn ended still finds its last events
# While the turn runs, its owner renews the journal every RENEW_S for RENEW_S * 3: the journal
# of a process killed mid-turn goes soon, and a reader learns that the turn was lost.
RENEW_S = 10.0
# A read waits at most this long for new entries: less than a Redis client's socket timeout.
MAX_READ_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class JournalEntry:
    seq: int  # 1, 2, ...: the SSE event id
    chunk: str  # the event as sent, its `id:` line included
    is_final: bool = False  # `turn.completed` or `error`: nothing follows


class TurnJournal(Protocol):
    async def publish(
        self, tenant_id: str, turn_id: str, entries: Sequence[JournalEntry], *, keep_s: float
    ) -> None:
        """Append `entries` (in order; seq 1 starts the turn's journal afresh: a retried turn
        keeps its id) and keep the journal `keep_s` more seconds (no entries: only that).
        CoordinationUnavailable when it cannot be kept."""

    async def read(
        self, tenant_id: str, turn_id: str, *, after: int, wait_s: float
    ) -> list[JournalEntry] | None:
        """The entries after `after`, waiting up to `wait_s` for one (with none newer: the
        final entry again, if the turn has ended, so a reader knows); None when no process
        journals the turn (unknown, another tenant's, or ended long ago)."""

    async def mark_watched(self, tenant_id: str, turn_id: str, *, for_s: float) -> None:
        """A reader streams the turn here, for at least `for_s` more seconds."""

    async def is_watched(self, tenant_id: str, turn_id: str) -> bool:
        """Whether a reader on another process streams the turn."""


class LocalJournal:
    """One process: nothing is published, nobody elsewhere reads."""

    async def publish(
        self, tenant_id: str, turn_id: str, entries: Sequence[JournalEntry], *, keep_s: float
    ) -> None:
        return None

    async def read(
        self, tenant_id: str, turn_id: str, *, after: int, wait_s: float
    ) -> list[JournalEntry] | None:
        return None

    async def mark_watched(self, tenant_id: str, turn_id: str, *, for_s: float) -> None:
        return None

    async def is_watched(self, tenant_id: str, turn_id: str) -> bool:
        return False
