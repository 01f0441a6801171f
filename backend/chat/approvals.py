"""Approval before a tool runs: the calls of a turn that wait for a person's decision.

A call of a tool that `tools.approval.required` names waits until someone approves or denies
it (the page, a chat's buttons, `POST /api/chat/turns/{turn_id}/approvals`), or until the
time runs out, which is a denial. Either way the model is told what happened; a denied call
never runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase

from backend.domain.ids import approval_ref


class Decision(Enum):
    APPROVED = "approved"
    DENIED = "denied"
    TIMED_OUT = "timed_out"
    UNASKABLE = "unaskable"  # nobody could be asked: the client cannot answer


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    required: tuple[str, ...] = ()  # tool names or globs
    timeout_s: float = 300.0
    can_ask: bool = True  # False: the turn's client cannot answer, so such calls are denied

    def requires(self, tool_name: str) -> bool:
        return any(fnmatchcase(tool_name, pattern) for pattern in self.required)


# Told when the turn starts and stops waiting for a decision on a call (its id; True, then
# False), so that a decision sent to another process finds this one.
Announce = Callable[[str, bool], Awaitable[None]]


class Approvals:
    """One turn's calls waiting for a decision, by tool call id."""

    def __init__(self, announce: Announce | None = None) -> None:
        self._waiting: dict[str, asyncio.Future[bool]] = {}
        self._announce = announce

    async def ask(self, tool_call_id: str) -> None:
        """Open the question before it is shown, so an answer that comes at once (here, or
        sent to another process) is kept."""
        self._waiting[tool_call_id] = asyncio.get_running_loop().create_future()
        if self._announce is not None:
            await self._announce(tool_call_id, True)

    async def wait(self, tool_call_id: str, timeout_s: float) -> Decision:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                return Decision.APPROVED if await self._waiting[tool_call_id] else Decision.DENIED
        return Decision.TIMED_OUT

    async def close(self, tool_call_id: str) -> None:
        """The question is over (answered, timed out, or the turn ended first)."""
        if self._waiting.pop(tool_call_id, None) is not None and self._announce is not None:
            await self._announce(tool_call_id, False)

    def decide(self, call: str, *, approved: bool) -> bool:
        """Answer a waiting call, named by its id or its `approval_ref`; False when none waits
        so (never asked, already answered, or timed out)."""
        for tool_call_id, future in self._waiting.items():
            if call in (tool_call_id, approval_ref(tool_call_id)) and not future.done():
                future.set_result(approved)
                return True
        return False


def not_run_note(decision: Decision, timeout_s: float) -> str:
    """What the model reads instead of a result, for a call that did not run."""
    if decision is Decision.DENIED:
        return "error: the user denied this call; it did not run"
    if decision is Decision.UNASKABLE:
        return (
            "error: this call needs a person's approval, which cannot be given where this "
            "conversation happens; it did not run"
        )
    return f"error: no one approved this call within {timeout_s:g} s; it did not run"
