"""A streamed turn that has to wait before it starts (behind the turn its session is running,
or on a busy server) begins its response within a keep-alive, so no proxy drops it while it
waits; it then runs in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from backend.app import create_app
from backend.domain.events import ProviderEvent
from backend.domain.requests import ChatRequest
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.sse import read_events


@dataclass
class GatedProvider:
    """Holds its first call until `gate` opens; answers like ScriptedProvider."""

    inner: ScriptedProvider
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    name: str = "gated"

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        if not self.asked.is_set():
            self.asked.set()
            await self.gate.wait()
        async for event in self.inner.stream(request):
            yield event

    async def aclose(self) -> None:
        return None


async def test_a_turn_queued_behind_its_sessions_turn_starts_its_stream_at_once(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(database_url, tmp_path, server={"sse_keepalive_s": 0.1})
    provider = GatedProvider(ScriptedProvider(replies=["first answer", "second answer"]))
    async with serve(create_app(settings, provider=provider)) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]

        async def turn(text: str) -> list[str]:
            body = {"session_id": session_id, "message": text, "stream": True}
            async with client.stream("POST", "/api/chat/send", json=body) as response:
                return [name async for name, _ in read_events(response)]

        first = asyncio.create_task(turn("one"))
        await provider.asked.wait()  # turn one holds the session's lock, its model call waits
        body = {"session_id": session_id, "message": "two", "stream": True}
        async with client.stream("POST", "/api/chat/send", json=body) as queued:
            lines = queued.aiter_lines()
            assert queued.status_code == 200
            assert await anext(lines) == ": keep-alive"  # while turn one has not finished
            assert not first.done()
            provider.gate.set()
            rest = [line async for line in lines]
        assert (await first)[0] == "turn.started" and (await first)[-1] == "turn.completed"
        page = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()
    names = [line.removeprefix("event:").strip() for line in rest if line.startswith("event:")]
    assert names[0] == "turn.started" and names[-1] == "turn.completed"
    assert [m["content"] for m in page["messages"]] == [
        "one",
        "first answer",
        "two",
        "second answer",
    ]  # in the order sent
