"""What moves between Tally processes sharing one PostgreSQL database (several workers, several
hosts): a cancel for a turn another process runs, a decision on a
tool call waiting there, the per-tenant requests-per-minute window,
and a streaming turn's events for a client that reconnects elsewhere. One process alone keeps
all of it in memory (`LocalCoordinator`); several share it through Redis
(`coordination.redis_url`, `RedisCoordinator`). Everything stored stays in the database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from limits.aio.storage import Storage

from backend.coordination.journal import TurnJournal
from backend.domain.decisions import ToolDecision
from backend.errors import TallyError

# Cancels what this process runs of a session's turns; False when it runs none.
CancelHere = Callable[[str, str], bool]
# Applies a decision on a tool call waiting in a turn this process runs; whether it was
# applied, None when the turn runs elsewhere.
DecideHere = Callable[[ToolDecision], bool | None]


class CoordinationUnavailable(TallyError):
    code = "coordination_unavailable"
    status = 503
    retry_after = 5.0


class Coordinator(Protocol):
    @property
    def kind(self) -> Literal["local", "redis"]: ...

    @property
    def rate_storage(self) -> Storage:
        """Where the requests-per-minute windows are counted."""
        ...

    @property
    def journal(self) -> TurnJournal:
        """Where streaming turns' events are kept for clients that reconnect elsewhere."""
        ...

    async def open(self, cancel_here: CancelHere, decide_here: DecideHere) -> None:
        """Start hearing cancels and approvals other processes send for turns this one runs."""

    async def turn_started(self, tenant_id: str, session_id: str) -> None:
        """This process now runs (or waits to run) a turn of the session."""

    async def turn_ended(self, tenant_id: str, session_id: str) -> None:
        """This process runs no more turns of the session."""

    async def cancel_elsewhere(self, tenant_id: str, session_id: str) -> bool:
        """Ask the other processes running a turn of the session to cancel it; whether one
        could be asked. CoordinationUnavailable when they cannot be reached."""

    async def approval_waiting(
        self, tenant_id: str, session_id: str, turn_id: str, tool_call_id: str, *, waiting: bool
    ) -> None:
        """This process's turn waits (or no longer waits) for a decision on a tool call."""

    async def decide_elsewhere(self, decision: ToolDecision) -> bool:
        """Send a decision on a tool call (named by its id or its approval ref) to the process
        whose turn waits for it, once: False when no process waits for it (or not in its
        session, when it names one), or another decision took it first. CoordinationUnavailable
        when they cannot be reached."""

    async def problem(self) -> str | None:
        """Why the processes cannot coordinate now, for health; None when they can."""

    async def aclose(self) -> None: ...
