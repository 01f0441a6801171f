"""A small SSE reader for tests: (event name, JSON data) pairs from a streamed response."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


async def read_events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    name, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data += line.removeprefix("data:").strip()
        elif line == "" and name:
            yield name, json.loads(data)
            name, data = "", ""


async def stream_turn(
    client: httpx.AsyncClient, body: dict[str, Any], **kwargs: Any
) -> list[tuple[str, dict[str, Any]]]:
    async with client.stream(
        "POST", "/api/chat/send", json={**body, "stream": True}, **kwargs
    ) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        return [event async for event in read_events(r)]
