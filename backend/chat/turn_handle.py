"""A turn as its callers hold it: the request that starts it, and the handle that streams its
events, in order, and cancels it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from backend.chat.approvals import Approvals
from backend.chat.turn_log import log_retry, log_turn_end
from backend.domain.events import RetryScheduled, TurnCompleted, TurnEvent, TurnFailed
from backend.domain.ids import new_turn_id
from backend.domain.messages import UserInput
from backend.metrics.turns import observe_turn_event


def normalise_idempotency_key(key: str | None) -> str | None:
    """A key without surrounding blanks; a blank key is no key."""
    return (key or "").strip() or None


@dataclass(frozen=True, slots=True)
class TurnRequest:
    tenant_id: str
    session_id: str
    user_input: UserInput
    idempotency_key: str | None = None  # blank means none
    stream: bool = True  # whether the client watches tokens arrive
    can_approve: bool = False  # whether someone can answer a tool call's approval question
    user_key: str | None = None  # the end user the client says the named session belongs to
    channel: str = "api"  # where the message came from (web, api, openai, telegram, dingtalk)

    def __post_init__(self) -> None:
        key = normalise_idempotency_key(self.idempotency_key)
        object.__setattr__(self, "idempotency_key", key)


class TurnHandle:
    """A running turn: its events, in order, a way to cancel it, and its tool calls waiting
    for approval."""

    def __init__(self, request: TurnRequest, approvals: Approvals | None = None) -> None:
        self.request = request
        self.started_at = time.perf_counter()
        self.turn_id = new_turn_id()
        self._queue: asyncio.Queue[TurnEvent] = asyncio.Queue()
        self._llm_task: asyncio.Task[None] | None = None
        self.is_cancel_requested = False
        self._is_finished = False
        self._is_holding_final = False
        self._held_final: TurnEvent | None = None
        self.approvals = approvals or Approvals()  # its calls waiting for a person's decision

    def log_fields(self) -> dict[str, str]:
        """Ids for structured logs; never message text."""
        request = self.request
        return {
            "tenant": request.tenant_id,
            "session": request.session_id,
            "turn": self.turn_id,
            "channel": request.channel,
        }

    def emit(self, event: TurnEvent) -> None:
        observe_turn_event(self.request.tenant_id, event, started_at=self.started_at)
        if isinstance(event, TurnCompleted | TurnFailed):
            seconds = time.perf_counter() - self.started_at
            log_turn_end(self.log_fields(), event, seconds=seconds)
        elif isinstance(event, RetryScheduled):
            log_retry(self.log_fields(), event)
        if self._is_holding_final and isinstance(event, TurnCompleted | TurnFailed):
            self._held_final = event
            return
        self._queue.put_nowait(event)

    def hold_final(self) -> None:
        """Keep the final event from the caller until `release`: the runner releases it once
        the turn no longer counts as running anywhere, so that a cancel sent after it was
        read finds nothing to cancel."""
        self._is_holding_final = True

    def release(self) -> None:
        self._is_holding_final = False
        if self._held_final is not None:
            self._queue.put_nowait(self._held_final)
            self._held_final = None

    def cancel(self) -> None:
        self.is_cancel_requested = True
        if self._llm_task is not None:
            self._llm_task.cancel()

    async def next_event(self) -> TurnEvent:
        event = await self._queue.get()
        self._is_finished = isinstance(event, TurnCompleted | TurnFailed)
        return event

    async def events(self) -> AsyncIterator[TurnEvent]:
        """The events still to come, until the final one (none after it was taken)."""
        while not self._is_finished:
            yield await self.next_event()

    async def result(self) -> TurnCompleted | TurnFailed:
        async for event in self.events():
            if isinstance(event, TurnCompleted | TurnFailed):
                return event
        raise AssertionError("a turn always ends with TurnCompleted or TurnFailed")
