"""One MCP server of one tenant, kept connected by a task of its own.

The SDK's transports live in anyio task groups that must be entered and left by the same task,
so one owner task holds the connection for its whole life; turns call tools through the session
it opened. A server that cannot be reached, or is lost, is tried again with backoff, and its
tools are listed afresh on every connection. What the server offered last stays known while it
is away, so a turn's tool list does not change (nor its prompt-cache prefix) when a server
blinks; a call meanwhile answers a clear error instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp import types as mcp_types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED

from backend.settings.tools import McpServerSettings
from backend.tools.mcp_shapes import (
    CallOutcome,
    ListedTool,
    McpCallError,
    McpUnavailable,
)

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 15.0
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpConnection:
    def __init__(
        self, name: str, settings: McpServerSettings, *, tenant_id: str, ping_every_s: float
    ) -> None:
        self.name = name
        self.tenant_id = tenant_id
        self._settings = settings
        self._ping_every_s = ping_every_s
        self.tools: tuple[ListedTool, ...] = ()
        self.problem: str | None = None  # why the server is not connected, once tried
        self._session: ClientSession | None = None
        self._lost = asyncio.Event()
        self._attempted = asyncio.Event()
        self._connected = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None
        self._calls = 0  # in flight: a server busy with one may be slow to answer a ping

    @property
    def is_connected(self) -> bool:
        return self._session is not None

    @property
    def is_started(self) -> bool:
        return self._owner is not None

    def start(self) -> None:
        """Begin connecting, once; later calls do nothing."""
        if self._owner is None:
            self._owner = asyncio.create_task(self._own(), name=f"mcp {self.name}")

    async def first_attempt(self) -> None:
        """Until the first connection succeeded or failed (at most connect_timeout_s)."""
        self.start()
        await self._attempted.wait()

    async def wait_connected(self) -> None:
        """Until the server is connected (tests and health; a turn never waits for this)."""
        self.start()
        await self._connected.wait()

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallOutcome:
        session = self._session
        if session is None:
            raise McpUnavailable(self._unavailable())
        self._calls += 1
        try:
            result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise
        except Exception as exc:
            raise self._call_error(session, exc) from exc
        finally:
            self._calls -= 1
        return CallOutcome(_result_text(result), bool(result.is_error))

    def _call_error(self, session: ClientSession, exc: Exception) -> McpCallError:
        """What the model reads of a call that failed; a lost connection is reconnected, a
        refusal by the server is only the call's error."""
        if not _is_connection_lost(exc):
            log.info(
                "MCP server %s of tenant %s: a call failed: %s", self.name, self.tenant_id, exc
            )
            answer = exc.error.message if isinstance(exc, MCPError) else "an unreadable result"
            return McpCallError(f"the MCP server {self.name!r} answered: {answer}")
        if session is self._session:  # known lost from now on, not only once the owner sees it
            self._session = None
            self._connected.clear()
            self._lost.set()
        log.warning("MCP server %s of tenant %s: lost: %s", self.name, self.tenant_id, exc)
        return McpUnavailable(
            f"the MCP server {self.name!r} went away during the call; it is being reconnected"
        )

    async def aclose(self) -> None:
        if self._owner is not None:
            self._owner.cancel()
            await asyncio.gather(self._owner, return_exceptions=True)

    def _unavailable(self) -> str:
        # Why is for the log and the operator's health view: it may name host paths or URLs.
        return f"the MCP server {self.name!r} is not connected; it is being reconnected"

    async def _own(self) -> None:
        delay = RETRY_FIRST_S
        while True:
            try:
                await self._connect_and_hold()
                delay = RETRY_FIRST_S  # it was up: the next loss is retried quickly
            except Exception as exc:  # every failure of the server is retried
                self.problem = _describe(exc)
                log.warning(
                    "MCP server %s of tenant %s: %s", self.name, self.tenant_id, self.problem
                )
            finally:
                self._session = None
                self._connected.clear()
                self._attempted.set()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def _connect_and_hold(self) -> None:
        async with self._transport() as (read, write), ClientSession(read, write) as session:
            async with asyncio.timeout(self._settings.connect_timeout_s):
                await session.initialize()
                listed = await _list_all(session)
            self.tools = tuple(
                ListedTool(tool.name, tool.description or tool.title or "", tool.input_schema)
                for tool in listed
            )
            self.problem = None
            self._lost.clear()
            self._session = session
            self._connected.set()
            self._attempted.set()
            log.info("MCP server %s of tenant %s: %d tools", self.name, self.tenant_id, len(listed))
            await self._hold(session)

    async def _hold(self, session: ClientSession) -> None:
        """Return when the connection is lost: a call saw it fail, or a ping went unanswered."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._ping_every_s):
                    await self._lost.wait()
            if self._lost.is_set():
                raise McpUnavailable("the connection was lost")
            if self._calls == 0:  # a call in flight says soon enough whether it is alive
                async with asyncio.timeout(self._settings.connect_timeout_s):
                    await session.send_ping()

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        if self._settings.command is not None:
            missing = [name for name in self._settings.env if name not in os.environ]
            if missing:
                raise McpUnavailable(f"the environment variable {missing[0]} is not set")
            parameters = StdioServerParameters(
                command=self._settings.command,
                args=self._settings.args,
                env={name: os.environ[name] for name in self._settings.env},
            )
            return stdio_client(parameters)
        return _http_transport(self._settings)


@asynccontextmanager
async def _http_transport(settings: McpServerSettings) -> AsyncIterator[Any]:
    assert settings.url is not None
    timeout = httpx2.Timeout(settings.connect_timeout_s, read=None)  # tool calls take their own
    async with (
        httpx2.AsyncClient(headers=_headers(settings), timeout=timeout) as http,
        streamable_http_client(settings.url, http_client=http) as streams,
    ):
        yield streams


def _headers(settings: McpServerSettings) -> dict[str, str]:
    """Header values with `${NAME}` replaced from the environment; a missing variable is an
    error naming it (never an empty secret sent)."""

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise McpUnavailable(f"the environment variable {name} is not set")
        return os.environ[name]

    return {key: _ENV_REFERENCE.sub(value_of, value) for key, value in settings.headers.items()}


async def _list_all(session: ClientSession) -> list[mcp_types.Tool]:
    listed = await session.list_tools()
    tools = list(listed.tools)
    while listed.next_cursor:
        listed = await session.list_tools(
            params=mcp_types.PaginatedRequestParams(cursor=listed.next_cursor)
        )
        tools += listed.tools
    return tools


def _result_text(result: mcp_types.CallToolResult) -> str:
    """The call's content as text: text blocks as they are, other blocks named."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _is_connection_lost(exc: Exception) -> bool:
    """Whether a call's failure means the connection is gone (not the server refusing it)."""
    if isinstance(exc, MCPError):
        return exc.error.code == CONNECTION_CLOSED or exc.error.message == "Session terminated"
    transport = (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError, httpx2.HTTPError)
    return isinstance(exc, transport)


def _describe(exc: BaseException) -> str:
    """A one-line reason, looking inside the task groups' exception groups."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return str(exc) or type(exc).__name__
