"""The names a model sees for MCP tools: `<server>__<tool>`, only characters vendors accept,
within 64 characters, each once, through the server's allow-list."""

from __future__ import annotations

from backend.settings.tools import McpServerSettings
from backend.tools.mcp_connection import ListedTool
from backend.tools.mcp_tools import McpServers, offered_name

SCHEMA = {"type": "object", "properties": {}}


def offered(
    listed: list[str], allow: list[str] | None = None, tenant_allow: list[str] | None = None
) -> list[str]:
    settings = McpServerSettings(command="unused", allow=allow)
    own = {"docs": tenant_allow} if tenant_allow is not None else None
    source = McpServers().source("acme", {"docs": settings}, own)
    (connection,) = source.connections  # never started: the listing is what it last saw
    connection.tools = tuple(ListedTool(name, f"{name} tool", SCHEMA) for name in listed)
    return [tool.name for tool in source.tools()]


def test_names_are_namespaced_and_made_of_characters_vendors_accept() -> None:
    assert offered(["read", "list.files", "grep ♥"]) == [
        "docs__read",
        "docs__list_files",
        "docs__grep__",
    ]


def test_a_name_too_long_or_taken_twice_is_left_out() -> None:
    too_long = "x" * 60
    assert offered(["a.b", "a_b", too_long, "ok"]) == ["docs__a_b", "docs__ok"]
    assert offered_name("docs", too_long) is None


def test_the_allow_list_takes_names_and_globs_as_the_server_names_them() -> None:
    listed = ["read_file", "read_dir", "write_file", "delete"]
    assert offered(listed, allow=["read_*", "delete"]) == [
        "docs__read_file",
        "docs__read_dir",
        "docs__delete",
    ]
    assert offered(listed, allow=[]) == []


def test_a_tenant_narrows_a_shared_server_with_its_own_allow_list() -> None:
    listed = ["read_file", "read_dir", "write_file"]
    assert offered(listed, allow=["read_*", "write_file"], tenant_allow=["*_file"]) == [
        "docs__read_file",
        "docs__write_file",
    ]
    assert offered(listed, tenant_allow=[]) == []


def test_tenants_never_share_a_connection() -> None:
    servers = McpServers()
    settings = {"docs": McpServerSettings(command="unused")}
    (acme,) = servers.source("acme", settings).connections
    (again,) = servers.source("acme", settings).connections
    (globex,) = servers.source("globex", settings).connections
    assert acme is again  # a rebuilt runtime of the same tenant reuses it
    assert globex is not acme and globex.tenant_id == "globex"
