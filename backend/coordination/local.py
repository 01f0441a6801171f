"""One process: nothing to share, the rate windows in memory."""

from __future__ import annotations

from typing import Literal

from limits.aio.storage import MemoryStorage, Storage

from backend.coordination.base import CancelHere, DecideHere
from backend.coordination.journal import LocalJournal, TurnJournal
from backend.domain.decisions import ToolDecision


class LocalCoordinator:
    kind: Literal["local"] = "local"

    def __init__(self) -> None:
        self._storage = MemoryStorage()
        self._journal = LocalJournal()

    @property
    def rate_storage(self) -> Storage:
        return self._storage

    @property
    def journal(self) -> TurnJournal:
        return self._journal

    async def open(self, cancel_here: CancelHere, decide_here: DecideHere) -> None:
        return None

    async def turn_started(self, tenant_id: str, session_id: str) -> None:
        return None

    async def turn_ended(self, tenant_id: str, session_id: str) -> None:
        return None

    async def cancel_elsewhere(self, tenant_id: str, session_id: str) -> bool:
        return False  # there is nowhere else

    async def approval_waiting(
        self, tenant_id: str, session_id: str, turn_id: str, tool_call_id: str, *, waiting: bool
    ) -> None:
        return None

    async def decide_elsewhere(self, decision: ToolDecision) -> bool:
        return False  # there is nowhere else

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None
