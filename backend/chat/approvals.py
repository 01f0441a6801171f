"""Approval before a tool runs: the calls of a turn that wait for a person's decision.

A call of a tool that `tools.approval.required` names waits until someone approves or denies
it (the page, a chat's buttons, `POST /api/chat/turns/{turn_id}/approvals`), or until the
time runs out, which is a denial. Either way the model is told what happened; a denied call
never runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase


class Decision(Enum):
    APPROVED = "approved"
    DENIED = "denied"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    required: tuple[str, ...] = ()  # tool names or globs
    timeout_s: float = 300.0

    def requires(self, tool_name: str) -> bool:
        return any(fnmatchcase(tool_name, pattern) for pattern in self.required)


class Approvals:
    """One turn's calls waiting for a decision, by tool call id."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[bool]] = {}

    def ask(self, tool_call_id: str) -> None:
        """Open the question before it is shown, so an answer that comes at once is kept."""
        self._waiting[tool_call_id] = asyncio.get_running_loop().create_future()

    async def wait(self, tool_call_id: str, timeout_s: float) -> Decision:
        future = self._waiting[tool_call_id]
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    return Decision.APPROVED if await future else Decision.DENIED
            return Decision.TIMED_OUT
        finally:
            del self._waiting[tool_call_id]

    def decide(self, tool_call_id: str, *, approved: bool) -> bool:
        """Answer a waiting call; False when none waits under that id (never asked, already
        answered, or timed out)."""
        future = self._waiting.get(tool_call_id)
        if future is None or future.done():
            return False
        future.set_result(approved)
        return True


def not_run_note(decision: Decision, timeout_s: float) -> str:
    """What the model reads instead of a result, for a call that did not run."""
    if decision is Decision.DENIED:
        return "error: the user denied this call; it did not run"
    return f"error: no one approved this call within {timeout_s:g} s; it did not run"
