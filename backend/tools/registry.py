"""The tools a model may call in a turn, and their safe execution."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping

from backend.domain.events import ToolCallRecord
from backend.domain.messages import ToolCall
from backend.domain.requests import ToolSpec
from backend.errors import ConfigError
from backend.tools.base import Tool, ToolContext, ToolFailed
from backend.tools.clock import NowTool
from backend.tools.mcp_tools import McpToolSource

log = logging.getLogger(__name__)

BUILTIN_TOOLS: Mapping[str, type[NowTool]] = {"now": NowTool}


class ToolRegistry:
    """The tools a tenant's model is offered: fixed ones, and those its MCP servers list now."""

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        timeout_s: float = 30.0,
        mcp: McpToolSource | None = None,
    ) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._timeout_s = timeout_s
        self._mcp = mcp
        self._fixed_specs = tuple(_spec(tool) for tool in self._tools.values())

    @classmethod
    def from_names(
        cls,
        names: Iterable[str],
        *,
        available: Iterable[Tool] = (),
        timeout_s: float = 30.0,
        mcp: McpToolSource | None = None,
    ) -> ToolRegistry:
        """The tools named in config (`tools.enabled`), taken from `available` (tools built by
        the application, such as the memory tools) or the built-in ones, and the MCP servers'."""
        offered = {tool.name: tool for tool in available}
        tools: list[Tool] = []
        for index, name in enumerate(names):
            if name in offered:
                tools.append(offered[name])
            elif name in BUILTIN_TOOLS:
                tools.append(BUILTIN_TOOLS[name]())
            else:
                known = ", ".join(sorted({*offered, *BUILTIN_TOOLS}))
                raise ConfigError(f"tools.enabled.{index}: unknown tool {name!r} (known: {known})")
        return cls(tools, timeout_s=timeout_s, mcp=mcp)

    def with_tools(self, tools: Iterable[Tool]) -> ToolRegistry:
        """This registry with `tools` offered too."""
        return ToolRegistry(
            [*self._tools.values(), *tools], timeout_s=self._timeout_s, mcp=self._mcp
        )

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        if self._mcp is None:
            return self._fixed_specs
        return self._fixed_specs + tuple(
            _spec(tool) for tool in self._mcp.tools() if tool.name not in self._tools
        )

    def connect(self) -> None:
        """Start connecting the MCP servers (at start-up, so their tools are known early)."""
        if self._mcp is not None:
            self._mcp.start()

    async def ready(self) -> None:
        """Until every MCP server was tried once (bounded by its connect timeout)."""
        if self._mcp is not None:
            await self._mcp.ready()

    def _find(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        if tool is None and self._mcp is not None:
            tool = next((t for t in self._mcp.tools() if t.name == name), None)
        return tool

    async def execute(self, call: ToolCall, context: ToolContext) -> ToolCallRecord:
        """Run one call. Every failure becomes an error result the model can read."""
        started = time.perf_counter()
        result, is_error = await self._run(call, context)
        return ToolCallRecord(
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            result=result,
            is_error=is_error,
            duration_ms=round((time.perf_counter() - started) * 1000),
        )

    async def _run(self, call: ToolCall, context: ToolContext) -> tuple[str, bool]:
        tool = self._find(call.name)
        if tool is None:
            return f"error: there is no tool named {call.name!r}", True
        if call.is_malformed:
            return f"error: the arguments are not a JSON object: {call.raw_arguments[:200]}", True
        try:
            async with asyncio.timeout(self._timeout_s):
                return await tool.run(call.arguments, context), False
        except ToolFailed as exc:
            return f"error: {exc}", True
        except TimeoutError:
            return f"error: the tool did not finish within {self._timeout_s:g} s", True
        except Exception:
            log.exception(
                "tool %s crashed",
                call.name,
                extra={
                    "tenant": context.tenant_id,
                    "session": context.session_id,
                    "turn": context.turn_id,
                },
            )
            return "error: the tool failed unexpectedly", True


def _spec(tool: Tool) -> ToolSpec:
    return ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters)
