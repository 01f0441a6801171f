"""A small SSE reader for tests: (event name, JSON data) pairs from a streamed response, or
(id, name, data) with the `id:` a reconnecting client sends back as `Last-Event-ID`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


async def read_events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    async for _, name, data in read_events_with_ids(response):
        yield name, data


async def read_events_with_ids(
    response: httpx.Response,
) -> AsyncIterator[tuple[int | None, str, dict[str, Any]]]:
    event_id: int | None = None
    name, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = int(line.removeprefix("id:").strip())
        elif line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data += line.removeprefix("data:").strip()
        elif line == "" and name:
            yield event_id, name, json.loads(data)
            event_id, name, data = None, "", ""


async def stream_turn(
    client: httpx.AsyncClient, body: dict[str, Any], **kwargs: Any
) -> list[tuple[str, dict[str, Any]]]:
    async with client.stream(
        "POST", "/api/chat/send", json={**body, "stream": True}, **kwargs
    ) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        return [event async for event in read_events(r)]
