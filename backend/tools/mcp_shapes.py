"""What MCP tools and their connections share, without the MCP SDK.

The SDK costs a process about 55 MB and half a second to import; a deployment that configures
no MCP server never loads it (backend/tools/mcp_tools.py imports the connection on first use).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PING_EVERY_S = 10.0  # a server lost while idle is noticed this soon, and reconnected


class McpCallError(Exception):
    """A call that did not give a result; the message is for the model (no host detail)."""


class McpUnavailable(McpCallError):
    """The server cannot take a call now (not connected, or lost during the call)."""


@dataclass(frozen=True, slots=True)
class ListedTool:
    name: str  # as the server names it
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallOutcome:
    text: str
    is_error: bool
