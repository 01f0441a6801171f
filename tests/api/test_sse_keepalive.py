"""A quiet stream (the model thinking, a long tool call) carries an SSE comment every
`server.sse_keepalive_s`, so proxies and load balancers keep it open; clients skip it, the
official `openai` SDK included."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.sse import read_events

QUIET_S = 0.6  # the model's silence before each word
EVERY_S = 0.1


@pytest.mark.slow
async def test_a_quiet_turn_stream_carries_keepalive_comments(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(database_url, tmp_path, server={"sse_keepalive_s": EVERY_S})
    provider = ScriptedProvider(replies=["two words", "two words"], delay_s=QUIET_S)
    async with serve(create_app(settings, provider=provider)) as client:
        body = {"message": "think first", "stream": True}
        async with client.stream("POST", "/api/chat/send", json=body) as response:
            lines = [line async for line in response.aiter_lines()]
        async with client.stream("POST", "/api/chat/send", json=body) as response:
            events = [name async for name, _ in read_events(response)]
    comments = [line for line in lines if line.startswith(":")]
    assert comments and set(comments) == {": keep-alive"}
    assert lines.index(comments[0]) < next(i for i, v in enumerate(lines) if "text.delta" in v)
    assert events[0] == "turn.started" and events[-1] == "turn.completed"  # comments skipped


async def test_the_openai_sdk_reads_through_keepalive_comments(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(database_url, tmp_path, server={"sse_keepalive_s": EVERY_S})
    provider = ScriptedProvider(replies=["two words"], delay_s=QUIET_S)
    async with serve(create_app(settings, provider=provider)) as client:
        oa = openai.AsyncOpenAI(base_url=f"{client.base_url}/v1", api_key="unused", max_retries=0)
        stream = await oa.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "think first"}],
            stream=True,
            extra_headers={"X-Tally-Session": "keepalive"},
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        await oa.close()
    assert text == "two words"
