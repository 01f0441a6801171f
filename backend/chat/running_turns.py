"""The turns this process runs and has not ended, found by session (for a cancel) and by turn
(for a decision on a tool call waiting in it), whichever process was asked."""

from __future__ import annotations

from backend.chat.turn_handle import TurnHandle
from backend.domain.decisions import ToolDecision


class RunningTurns:
    def __init__(self) -> None:
        # Each session's turns not yet ended, oldest first: the oldest is writing or about to
        # (the session lock is FIFO), so a cancel right after a message was sent still finds it.
        self._by_session: dict[tuple[str, str], list[TurnHandle]] = {}

    def add(self, handle: TurnHandle) -> None:
        key = (handle.request.tenant_id, handle.request.session_id)
        self._by_session.setdefault(key, []).append(handle)

    def remove(self, handle: TurnHandle) -> None:
        key = (handle.request.tenant_id, handle.request.session_id)
        handles = self._by_session[key]
        handles.remove(handle)
        if not handles:
            del self._by_session[key]

    def cancel(self, tenant_id: str, session_id: str) -> bool:
        """Cancel the session's turn in flight (or the next, while it waits for the lock);
        False when this process runs none."""
        handles = self._by_session.get((tenant_id, session_id))
        if not handles:
            return False
        handles[0].cancel()
        return True

    def decide(self, decision: ToolDecision) -> bool | None:
        """Apply a decision on a call waiting in the tenant's turn (of its session, when it
        names one): whether it was applied; None when this process does not run the turn."""
        for (tenant, session), handles in self._by_session.items():
            for handle in handles:
                if (tenant, handle.turn_id) != (decision.tenant_id, decision.turn_id):
                    continue
                if decision.session_id is not None and session != decision.session_id:
                    return False
                return handle.approvals.decide(decision.tool_call_id, approved=decision.approved)
        return None
