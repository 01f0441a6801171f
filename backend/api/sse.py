"""Turn events as Server-Sent Events: `event: <name>` and a JSON `data:` line.

Every event's data is made storable first (`domain/text.py`): whatever text an event carries (a
provider's error message, a tool's arguments), its line always encodes as UTF-8, so a stream
(and the turn journal that copies it) always reaches its terminal event."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from backend.domain.events import (
    Compacted,
    MemoryDegraded,
    RetryScheduled,
    TextDelta,
    ThinkingDelta,
    ToolApprovalRequested,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
    TurnStarted,
)
from backend.domain.text import storable_json


def _tool_call(event: Any) -> dict[str, object]:
    call = event.call
    return {"tool_call_id": call.id, "tool_name": call.name, "arguments": call.arguments}


def _failed(event: Any) -> dict[str, object]:
    payload = asdict(event)
    payload.pop("status")
    return payload


EVENT_NAMES: dict[type, tuple[str, Callable[[Any], dict[str, object]]]] = {
    TurnStarted: ("turn.started", asdict),
    TextDelta: ("text.delta", asdict),
    ThinkingDelta: ("thinking.delta", asdict),
    ToolStarted: ("tool.call", _tool_call),
    ToolApprovalRequested: ("tool.approval", asdict),
    ToolFinished: ("tool.result", asdict),
    Compacted: ("compaction", asdict),
    MemoryDegraded: ("memory.degraded", asdict),
    RetryScheduled: ("retry", asdict),
    TurnFailed: ("error", _failed),
    TurnCompleted: ("turn.completed", asdict),
}


def event_text(event: TurnEvent, event_id: int | None = None) -> str:
    """The event as SSE; with `event_id`, the `id:` a reconnecting client sends back."""
    name, to_payload = EVENT_NAMES[type(event)]
    payload = storable_json(to_payload(event))
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    head = "" if event_id is None else f"id: {event_id}\n"
    return f"{head}event: {name}\ndata: {data}\n\n"


def encode_event(event: TurnEvent) -> bytes:
    return event_text(event).encode()
