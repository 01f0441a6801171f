"""The built-in `now` tool: the current date and time, in UTC or a named time zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from backend.tools.base import ToolContext, ToolFailed


class NowTool:
    name = "now"
    description = "The current date and time (ISO 8601). Optionally in an IANA time zone."
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "IANA zone, e.g. Asia/Shanghai"}
        },
        "additionalProperties": False,
    }

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._clock = clock

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        zone_name = arguments.get("timezone") or "UTC"
        try:
            zone = ZoneInfo(str(zone_name))
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ToolFailed(f"unknown time zone {zone_name!r}") from exc
        return self._clock().astimezone(zone).isoformat(timespec="seconds")
