"""Prompt-cache tokens (read from and written to the vendor's cache) reach every place a turn's
usage is shown: the send reply, the streamed `turn.completed`, the usage API, /metrics and the
OpenAI-compatible facade (as OpenAI's `prompt_tokens_details.cached_tokens`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from backend.app import create_app
from backend.domain.messages import Usage
from backend.providers.scripted import ScriptedProvider
from backend.settings import Settings
from tests.api.test_metrics import samples
from tests.api.test_openai_compat import ask, said, sdk
from tests.conftest import serve
from tests.sse import stream_turn

# What a vendor with a warm prompt cache reports for each call.
CACHED_CALL = Usage(
    prompt_tokens=2000, completion_tokens=3, cached_tokens=1536, cache_write_tokens=64
)
CACHED_USAGE = {
    "prompt_tokens": 2000,
    "completion_tokens": 3,
    "cached_tokens": 1536,
    "cache_write_tokens": 64,
}


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    provider = ScriptedProvider(replies=["Cached answer here."], usage=CACHED_CALL)
    async with serve(create_app(settings, provider=provider)) as served:
        yield served


async def test_send_and_its_stream_report_the_turns_cache_tokens(
    client: httpx.AsyncClient,
) -> None:
    sent = await client.post("/api/chat/send", json={"message": "hi"})
    events = await stream_turn(
        client, {"session_id": sent.json()["session_id"], "message": "again"}
    )
    name, completed = events[-1]
    assert sent.status_code == 200 and sent.json()["usage"] == CACHED_USAGE
    assert name == "turn.completed" and completed["usage"] == CACHED_USAGE


async def test_the_usage_api_adds_up_a_days_cache_tokens(client: httpx.AsyncClient) -> None:
    for text in ("one", "two"):
        assert (await client.post("/api/chat/send", json={"message": text})).status_code == 200
    (day,) = (await client.get("/api/usage")).json()["days"]
    (operator_day,) = (await client.get("/api/admin/usage")).json()["days"]
    assert (day["turns"], day["prompt_tokens"], day["completion_tokens"]) == (2, 4000, 6)
    assert (day["cached_tokens"], day["cache_write_tokens"]) == (3072, 128)
    assert operator_day == day


async def test_metrics_count_cached_and_cache_write_tokens(client: httpx.AsyncClient) -> None:
    before = samples((await client.get("/metrics")).text)
    assert (await client.post("/api/chat/send", json={"message": "hi"})).status_code == 200
    after = samples((await client.get("/metrics")).text)

    def delta(kind: str) -> float:
        key = ("tally_tokens_total", (("kind", kind), ("tenant", "default")))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert (delta("prompt"), delta("cached"), delta("cache_write")) == (2000, 1536, 64)


@pytest.mark.parametrize("is_streaming", [False, True], ids=["json", "stream"])
async def test_the_openai_facade_reports_cached_prompt_tokens_as_openai_does(
    client: httpx.AsyncClient, is_streaming: bool
) -> None:
    answer = await ask(
        sdk(client),
        said("hi"),
        is_streaming=is_streaming,
        extra_headers={"X-Tally-Session": "cached"},
    )
    assert answer.text == "Cached answer here."
    assert (answer.usage.prompt_tokens, answer.usage.total_tokens) == (2000, 2003)
    assert answer.usage.prompt_tokens_details.cached_tokens == 1536
