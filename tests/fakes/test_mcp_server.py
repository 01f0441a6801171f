"""The fake MCP server, driven by the real `mcp` SDK client over stdio and streamable HTTP.

Clients are opened inside each test body: a yield fixture holding an SDK client fails at
teardown under pytest-asyncio ("exit cancel scope in a different task").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.fakes.mcp_harness import mcp_http_server, stdio_command, stdio_env
from tests.fakes.mcp_server import ENDPOINT_PATH

pytestmark = pytest.mark.process

STDIO_TOOLS = {"echo", "add", "big", "slow", "fail", "refuse", "whoami", "record", "odd"}
TOKEN = "Bearer fake-mcp-token"


@asynccontextmanager
async def stdio_session(env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """An initialized client session with a freshly spawned stdio server."""
    command, args = stdio_command()
    params = StdioServerParameters(command=command, args=args, env={**stdio_env(), **(env or {})})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A client session over streamable HTTP; `initialize` is left to the test."""
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


def text_of(result: CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, TextContent))


async def tool_names(session: ClientSession) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}


# ---- stdio ---------------------------------------------------------------------------------------


async def test_stdio_server_lists_and_runs_its_tools() -> None:
    async with stdio_session() as session:
        assert await tool_names(session) == STDIO_TOOLS
        echoed = await session.call_tool("echo", {"text": "héllo"})
        added = await session.call_tool("add", {"a": 2, "b": 40})
        slept = await session.call_tool("slow", {"seconds": 0.01})
        big = text_of(await session.call_tool("big", {"size": 1000}))

    assert (text_of(echoed), echoed.is_error) == ("héllo", False)
    assert added.structured_content == {"result": 42}
    assert text_of(slept) == "slept"
    assert (len(big), big[:10], big[-3:]) == (1000, "0123456789", "END")


async def test_failing_tool_reaches_the_client_as_an_error_with_its_message() -> None:
    async with stdio_session() as session:
        result = await session.call_tool("fail", {"message": "disk on fire"})

    assert result.is_error
    # The SDK prefixes the ToolError's text: "Error executing tool fail: disk on fire".
    assert "disk on fire" in text_of(result)


async def test_environment_reaches_the_stdio_server(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {"FAKE_MCP_SECRET": "s3cret", "FAKE_MCP_LOG": str(log), "FAKE_MCP_TOOLS": "whoami,record"}
    async with stdio_session(env) as session:
        names = await tool_names(session)
        whoami = await session.call_tool("whoami", {})
        await session.call_tool("record", {"note": "first"})
        await session.call_tool("record", {"note": "second"})

    assert names == {"whoami", "record"}
    assert text_of(whoami) == "s3cret"
    assert log.read_text().splitlines() == ["first", "second"]


# ---- streamable HTTP -----------------------------------------------------------------------------


async def test_http_server_serves_tools_and_sees_the_authorization_header() -> None:
    async with (
        mcp_http_server(env={"FAKE_MCP_AUTH": TOKEN}) as server,
        http_session(server.url, {"Authorization": TOKEN}) as session,
    ):
        await session.initialize()
        names = await tool_names(session)
        added = await session.call_tool("add", {"a": 1, "b": 2})
        header = await session.call_tool("header", {})

    assert server.url.endswith(f":{server.port}{ENDPOINT_PATH}")
    assert names == STDIO_TOOLS | {"header"}
    assert added.structured_content == {"result": 3}
    assert text_of(header) == TOKEN


async def test_http_server_refuses_a_wrong_token() -> None:
    async with mcp_http_server(env={"FAKE_MCP_AUTH": TOKEN}) as server:
        async with http_session(server.url, {"Authorization": "Bearer wrong"}) as session:
            with pytest.raises(MCPError):
                await session.initialize()


async def test_killed_server_breaks_the_session_and_a_restart_serves_a_new_one() -> None:
    async with mcp_http_server() as server:
        async with http_session(server.url) as session:
            await session.initialize()
            server.kill()
            with pytest.raises(MCPError, match="Connection closed"):
                await session.call_tool("echo", {"text": "lost"})

        await server.restart()
        async with http_session(server.url) as session:
            await session.initialize()
            echoed = await session.call_tool("echo", {"text": "back"})

    assert text_of(echoed) == "back"
