"""One process: nothing to share, the rate windows in memory."""

from __future__ import annotations

from typing import Literal

from limits.aio.storage import MemoryStorage, Storage

from backend.coordination.base import CancelHere


class LocalCoordinator:
    kind: Literal["local"] = "local"

    def __init__(self) -> None:
        self._storage = MemoryStorage()

    @property
    def rate_storage(self) -> Storage:
        return self._storage

    async def open(self, cancel_here: CancelHere) -> None:
        return None

    async def turn_started(self, tenant_id: str, session_id: str) -> None:
        return None

    async def turn_ended(self, tenant_id: str, session_id: str) -> None:
        return None

    async def cancel_elsewhere(self, tenant_id: str, session_id: str) -> bool:
        return False  # there is nowhere else

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None
