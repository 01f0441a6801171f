"""A tenant's tools from its settings: those `tools.enabled` names, the workspace's when it is
on, and its MCP servers'."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from backend.memory.base import MemoryStore
from backend.memory.proposals import Confirmation
from backend.settings import Settings
from backend.tools.base import Tool
from backend.tools.mcp_tools import McpServers
from backend.tools.memory_tools import MemorySearchTool, MemoryWriteTool
from backend.tools.registry import ToolRegistry
from backend.tools.workspace import workspace_tools


def tool_registry(
    settings: Settings,
    *,
    tenant_id: str,
    memory: MemoryStore,
    mcp: McpServers,
    confirmation: Confirmation | None = None,
    extra_tools: Iterable[Tool] = (),
) -> ToolRegistry:
    """`confirmation`: where `memory_write` proposes a person's lines instead of writing them."""
    tools = settings.tools
    scope_by_user = settings.memory.scope == "user"
    servers = tools.mcp_servers
    registry = ToolRegistry.from_names(
        tools.enabled,
        available=[
            MemorySearchTool(memory, scope_by_user=scope_by_user),
            MemoryWriteTool(memory, scope_by_user=scope_by_user, confirmation=confirmation),
            *extra_tools,
        ],
        timeout_s=tools.timeout_s,
        mcp=mcp.source(tenant_id, servers, tools.mcp_allow) if servers else None,
    )
    if not tools.workspace.enabled:
        return registry
    return registry.with_tools(workspace_tools(workspace_root(settings), tools.workspace))


def workspace_root(settings: Settings) -> Path:
    """Where the tenants' workspaces live, each in a folder named by its tenant id."""
    return Path(settings.data_dir) / "workspaces"
