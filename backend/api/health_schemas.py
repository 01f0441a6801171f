"""The body of `GET /api/health`: the database, coordination, providers and bots."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class ProviderHealthPublic(BaseModel):
    """A configured provider's latest call in this process; health never calls it."""

    name: str
    base_url: str | None = Field(description="where its calls go; none for the scripted kind")
    last_outcome: Literal["ok", "error", "unknown"] = Field(
        description="unknown until this process has called it"
    )
    last_error_code: str | None = None
    last_error: str | None = Field(None, description="names the provider, its URL and the cause")
    last_at: datetime | None = None


class ChannelHealthPublic(BaseModel):
    """A chat-channel bot, as an operator sees it."""

    tenant_id: str
    bot: str
    kind: str
    mode: str
    connected: bool
    leading: bool = Field(
        False, description="this process polls or holds the Stream connection (one of all)"
    )
    last_update_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None


class McpServerHealthPublic(BaseModel):
    """A tenant's MCP server, as this process is connected to it (an administrator's view)."""

    tenant_id: str
    server: str
    connected: bool
    tools: int = Field(description="the tools it listed last")
    problem: str | None = Field(None, description="why it is not connected, once tried")


class MemoryProblemPublic(BaseModel):
    """Where memory does not work, as an operator or the tenant's administrator sees it."""

    tenant_id: str
    session_id: str | None = None  # none: the tenant's memory could not be read
    code: Literal["summaries_failing", "memory_unreadable"]
    reason: str


class HealthPublic(BaseModel):
    status: Literal["ok", "degraded"] = Field(
        description="degraded when the database is unavailable (HTTP 503), or Redis cannot be "
        "reached, or the default model's provider failed its latest call, or memory is "
        "degraded (HTTP 200)"
    )
    database: Literal["ok", "unavailable"]
    database_problem: str | None = None  # why it is unavailable: the driver's words, no data
    coordination: Literal["local", "redis"] = Field(
        "local", description="how processes share cancels and rate windows (docs/operations.md)"
    )
    coordination_problem: str | None = None  # Redis cannot be reached: why (status degraded)
    provider: str
    model: str
    providers: list[ProviderHealthPublic]
    is_demo: bool
    notice: str | None = None
    demo_key_env: str | None = None  # demo mode: the variable to set for a real model
    demo_window: int | None = None  # demo mode: its small window, in messages
    demo_config_file: str | None = None  # demo mode: the file naming the model and its key
    assistant_name: str = Field(
        "Tally", description="the caller's tenant's persona.name: who answers on the page"
    )
    channels: list[ChannelHealthPublic] = Field(
        default_factory=list, description="the bots an administrator's key may see"
    )
    mcp_servers: list[McpServerHealthPublic] = Field(
        default_factory=list, description="the MCP servers an administrator's key may see"
    )
    memory_scope: Literal["tenant", "user"] = Field(
        "tenant", description="the caller's tenant: one memory, or one per end user (person)"
    )
    confirm_writes: bool = Field(
        False, description="lines about a person wait for their confirmation before memory"
    )
    memory: Literal["ok", "degraded"] = Field(
        "ok",
        description="degraded while some session's summaries keep failing or a memory "
        "cannot be read",
    )
    memory_problem: str | None = None  # how many places, for everyone; where, for admins:
    memory_problems: list[MemoryProblemPublic] = Field(default_factory=list)
