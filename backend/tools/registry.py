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

log = logging.getLogger(__name__)

BUILTIN_TOOLS: Mapping[str, type[NowTool]] = {"now": NowTool}


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool], *, timeout_s: float = 30.0) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._timeout_s = timeout_s
        self.specs = tuple(
            ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
            for t in self._tools.values()
        )

    @classmethod
    def from_names(
        cls, names: Iterable[str], *, available: Iterable[Tool] = (), timeout_s: float = 30.0
    ) -> ToolRegistry:
        """The tools named in config (`tools.enabled`), taken from `available` (tools built by
        the application, such as the memory tools) or the built-in ones."""
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
        return cls(tools, timeout_s=timeout_s)

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
        tool = self._tools.get(call.name)
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
