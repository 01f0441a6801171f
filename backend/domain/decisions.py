"""A person's answer to a tool call that waits for approval in a running turn."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """Approve or deny the call `tool_call_id` (its id or its approval ref) of the tenant's turn
    `turn_id`; with `session_id`, only if the turn is that session's (a chat's button decides
    for its own chat only)."""

    tenant_id: str
    turn_id: str
    tool_call_id: str
    approved: bool
    session_id: str | None = None
