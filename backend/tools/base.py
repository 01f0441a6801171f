"""The Tool protocol: a name, a JSON schema for its arguments, and an async `run`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling: a tool acts only within this tenant and session."""

    tenant_id: str
    session_id: str
    turn_id: str
    user_key: str | None = None
    # Where it is said, as memory lines name their source: `web`, `api`, `openai`, or the
    # platform chat (`telegram:<bot>:<chat id>`, `dingtalk:<bot>:<conversation>`).
    chat: str | None = None


class ToolFailed(Exception):
    """Raised by a tool for an error the model should see and may recover from."""


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, object]

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str: ...
