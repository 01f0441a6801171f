"""The `tools:` section of `config.yaml`: which tools a tenant's model may call, the MCP servers
that bring more, the tenant's workspace, and the tools that wait for a person's approval.
Part of the settings (`backend.settings.tools`)."""

from __future__ import annotations

import re
from typing import Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from backend.settings.base import EnvName, Strict

# A server's name prefixes its tools' names (`files__read`), which vendors limit to
# [A-Za-z0-9_-]{1,64}: the name leaves room for the tool's own.
MCP_SERVER_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,23}")
TOOL_PATTERN = re.compile(r"[A-Za-z0-9_*?-]{1,80}")


class McpServerSettings(Strict):
    """One MCP server: a command Tally starts and speaks to over stdio, or a streamable-HTTP
    URL. Secrets come from the environment: `env` names the variables the command is given,
    and `${NAME}` in a header's value is replaced by that variable."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: list[EnvName] = Field(default_factory=list)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # The server's tools the model is offered (names or globs, as the server names them);
    # None offers every tool it lists.
    allow: list[str] | None = None
    # How long a turn waits for the server's first connection; a call takes tools.timeout_s.
    connect_timeout_s: float = Field(15.0, gt=0, le=300)

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (stdio) or url (streamable HTTP), not both")
        if self.url is not None and urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError("url must be an http:// or https:// address")
        if self.command is None and (self.args or self.env):
            raise ValueError("args and env are for a command; a url server takes headers")
        return self

    @field_validator("allow")
    @classmethod
    def _patterns(cls, patterns: list[str] | None) -> list[str] | None:
        for pattern in patterns or ():
            if not TOOL_PATTERN.fullmatch(pattern):
                raise ValueError(f"{pattern!r}: a tool name or a glob such as read_*")
        return patterns


class WorkspaceSettings(Strict):
    """Files the tenant's model may read and write (`read_file`, `list_files`, `write_file`),
    in `<data_dir>/workspaces/<tenant>/` and nowhere else."""

    enabled: bool = False
    max_file_bytes: int = Field(1_000_000, ge=1, le=100_000_000)
    max_total_bytes: int = Field(50_000_000, ge=1, le=10_000_000_000)
    max_files: int = Field(1_000, ge=1, le=1_000_000)


class ApprovalSettings(Strict):
    """Tools that run only once a person approves the call (names or globs of the names the
    model sees, such as `write_file` or `files__*`); unanswered after `timeout_s`, a denial."""

    required: list[str] = Field(default_factory=list)
    timeout_s: float = Field(300.0, gt=0, le=86_400)

    @field_validator("required")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not TOOL_PATTERN.fullmatch(pattern):
                raise ValueError(f"{pattern!r}: a tool name or a glob such as files__*")
        return patterns


class ToolSettings(Strict):
    enabled: list[str] = Field(default_factory=lambda: ["memory_search", "memory_write", "now"])
    max_tool_iterations: int = Field(8, ge=1, le=64)
    timeout_s: float = Field(30.0, gt=0)
    # A result longer than this is cut in the request to the model (with a note saying so);
    # storage keeps it whole.
    max_result_chars: int = Field(20_000, ge=200, le=2_000_000)
    mcp_servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    # A tenant's own narrowing of servers it shares (by server: tool names or globs), which
    # the admin API may set, unlike the servers themselves.
    mcp_allow: dict[str, list[str]] = Field(default_factory=dict)
    workspace: WorkspaceSettings = WorkspaceSettings()
    approval: ApprovalSettings = ApprovalSettings()

    @model_validator(mode="after")
    def _allow_names_servers(self) -> Self:
        for name, patterns in self.mcp_allow.items():
            if name not in self.mcp_servers:
                known = ", ".join(self.mcp_servers) or "none"
                raise ValueError(f"mcp_allow.{name}: no such MCP server (defined: {known})")
            for pattern in patterns:
                if not TOOL_PATTERN.fullmatch(pattern):
                    raise ValueError(f"mcp_allow.{name}: {pattern!r} is not a tool name or glob")
        return self

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in servers:
            if not MCP_SERVER_NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r}: a server name is 1-24 lowercase letters, digits or '-'"
                )
        return servers
