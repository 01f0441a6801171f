"""A frozen SSE reader holds only its own stream: other sessions keep answering (docs/operations.md,
reliability J)."""

from __future__ import annotations

import asyncio

import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings
from tests.conftest import serve
from tests.sse import read_events

LONG_REPLY = " ".join(f"word{i}" for i in range(30_000))  # about 1.5 MB of SSE: fills the socket


@pytest.mark.slow
async def test_a_frozen_stream_does_not_block_other_sessions(settings: Settings) -> None:
    provider = ScriptedProvider(replies=["short answer"])
    provider.push(LONG_REPLY)
    async with serve(create_app(settings, provider=provider)) as client:
        frozen_session = (await client.post("/api/chat/sessions", json={})).json()["id"]
        other_session = (await client.post("/api/chat/sessions", json={})).json()["id"]
        body = {"session_id": frozen_session, "message": "tell me everything", "stream": True}
        async with client.stream("POST", "/api/chat/send", json=body) as frozen:
            assert frozen.status_code == 200
            await asyncio.sleep(0.5)  # the reader stops reading; the server's writes back up
            replies = [
                await asyncio.wait_for(
                    client.post(
                        "/api/chat/send", json={"session_id": other_session, "message": f"q{i}"}
                    ),
                    timeout=60,  # blocked would be forever; a busy machine is slow
                )
                for i in range(3)
            ]
            events = [name async for name, _ in read_events(frozen)]  # the reader wakes up
        stored = (await client.get(f"/api/chat/sessions/{frozen_session}/messages")).json()[
            "messages"
        ]
    assert [r.json()["reply"] for r in replies] == ["short answer"] * 3
    assert events[-1] == "turn.completed" and events.count("text.delta") == 30_000
    assert stored[-1]["content"] == LONG_REPLY and stored[-1]["status"] == "complete"
