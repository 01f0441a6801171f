"""MCP servers' tools, offered to a tenant's model as `<server>__<tool>`.

Each tenant has connections of its own (a server's state never crosses tenants); runtimes rebuilt
with the same server settings share them, and all close at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from backend.settings.tools import McpServerSettings
from backend.tools.base import Tool, ToolContext, ToolFailed
from backend.tools.mcp_shapes import PING_EVERY_S, ListedTool, McpCallError

if TYPE_CHECKING:
    from backend.tools.mcp_connection import McpConnection

log = logging.getLogger(__name__)

MAX_TOOL_NAME = 64  # OpenAI's and Anthropic's limit on a function's name
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(server: str, tool: str) -> str | None:
    """The name the model sees, or None when the server's name for it cannot make one."""
    name = f"{server}__{_NOT_IN_NAMES.sub('_', tool)}"
    return name if len(name) <= MAX_TOOL_NAME else None


class McpTool:
    def __init__(self, connection: McpConnection, listed: ListedTool, name: str) -> None:
        self.name = name
        self.description = listed.description or f"{listed.name} (MCP server {connection.name})"
        self.parameters: dict[str, object] = dict(listed.input_schema)
        self._connection = connection
        self._server_name = listed.name

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        try:
            outcome = await self._connection.call(self._server_name, dict(arguments))
        except McpCallError as exc:
            raise ToolFailed(str(exc)) from exc
        if outcome.is_error:
            raise ToolFailed(outcome.text or f"{self._server_name} reported an error")
        return outcome.text


class McpToolSource:
    """A tenant's MCP servers: the tools each listed last, through the server's allow-list
    and the tenant's own (`tools.mcp_allow`)."""

    def __init__(
        self,
        servers: list[tuple[McpConnection, McpServerSettings]],
        tenant_allow: Mapping[str, list[str]] | None = None,
    ) -> None:
        self._servers = servers
        self._tenant_allow = tenant_allow or {}
        self._built: dict[str, tuple[tuple[ListedTool, ...], list[Tool]]] = {}

    @property
    def connections(self) -> list[McpConnection]:
        return [connection for connection, _ in self._servers]

    def start(self) -> None:
        for connection, _ in self._servers:
            connection.start()

    async def ready(self) -> None:
        """Until each server's first connection was tried (each within its connect timeout),
        so a tenant's first turn already knows the tools of a server that is up."""
        await asyncio.gather(*(_tried(c, s.connect_timeout_s) for c, s in self._servers))

    def tools(self) -> list[Tool]:
        offered: list[Tool] = []
        for connection, settings in self._servers:
            listed = connection.tools
            built = self._built.get(connection.name)
            if built is None or built[0] is not listed:
                allow = (settings.allow, self._tenant_allow.get(connection.name))
                built = (listed, _tools_of(connection, listed, allow))
                self._built[connection.name] = built
            offered += built[1]
        return offered


async def _tried(connection: McpConnection, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await connection.first_attempt()


def _tools_of(
    connection: McpConnection,
    listed: tuple[ListedTool, ...],
    allow: tuple[list[str] | None, ...],
) -> list[Tool]:
    """The listed tools every allow-list lets through (None lets all through)."""
    tools: list[Tool] = []
    for tool in listed:
        if not all(a is None or any(fnmatchcase(tool.name, p) for p in a) for a in allow):
            continue
        name = offered_name(connection.name, tool.name)
        if name is None or name in {t.name for t in tools}:  # vendors refuse a name twice
            log.warning("MCP server %s: tool %r cannot be offered", connection.name, tool.name)
            continue
        tools.append(McpTool(connection, tool, name))
    return tools


class McpServers:
    """Every tenant's MCP connections, one per tenant, server name and settings."""

    def __init__(self, *, ping_every_s: float | None = None) -> None:
        self._ping_every_s = ping_every_s or PING_EVERY_S
        self._connections: dict[tuple[str, str, str], McpConnection] = {}

    def source(
        self,
        tenant_id: str,
        servers: Mapping[str, McpServerSettings],
        tenant_allow: Mapping[str, list[str]] | None = None,
    ) -> McpToolSource:
        return McpToolSource(
            [(self._connection(tenant_id, name, s), s) for name, s in servers.items()],
            tenant_allow,
        )

    def connections(self, tenant_id: str | None = None) -> list[McpConnection]:
        """The connections started (of one tenant, or of all), for health and tests."""
        return [
            connection
            for (tenant, _, _), connection in self._connections.items()
            if connection.is_started and tenant_id in (None, tenant)
        ]

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._connections.values()))
        self._connections.clear()

    def _connection(self, tenant_id: str, name: str, settings: McpServerSettings) -> McpConnection:
        fingerprint = hashlib.sha256(settings.model_dump_json().encode()).hexdigest()
        key = (tenant_id, name, fingerprint)
        if key not in self._connections:
            # Imported with the first server: the SDK is heavy (backend/tools/mcp_shapes.py).
            from backend.tools.mcp_connection import McpConnection

            self._connections[key] = McpConnection(
                name, settings, tenant_id=tenant_id, ping_every_s=self._ping_every_s
            )
        return self._connections[key]
