"""Tally's requests are served from the vendors' prompt caches: through the real SDKs against
fakes that cache the way each vendor does, a session's later turns read the earlier turns'
prefix, and what the caches served is what Tally accounts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.app import create_app
from tests.chat.test_overflow import send
from tests.conftest import make_settings, serve
from tests.fakes import FakeServer
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer

TURNS = 4


@pytest.fixture(params=["openai", "anthropic"])
def vendor(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeServer]]:
    # The vendors' 1,024-token minimum, lowered: the test's prompts are a few hundred words.
    server: FakeServer = (
        FakeOpenAIServer(cache_min_tokens=16, cache_increment=1)
        if request.param == "openai"
        else FakeAnthropicServer(cache_min_tokens=16)
    )
    with server:
        yield request.param, server


def cache_settings(database_url: str, tmp_path: Path, kind: str, server: FakeServer) -> Any:
    provider: dict[str, Any] = {"base_url": server.base_url, "max_retries": 0}
    if kind == "openai":
        provider.update(kind="openai_compatible", prompt_cache_key=True)
    else:
        provider.update(kind="anthropic")
    return make_settings(
        database_url,
        tmp_path,
        providers={"llm": provider},
        model={"provider": "llm", "name": "gpt-4o-mini" if kind == "openai" else "claude-test"},
    )


async def test_later_turns_read_the_earlier_turns_prefix_from_the_cache(
    database_url: str, tmp_path: Path, vendor: tuple[str, FakeServer]
) -> None:
    kind, server = vendor
    app = create_app(cache_settings(database_url, tmp_path, kind, server))
    async with serve(app) as client:
        first = (await client.post("/api/chat/sessions", json={})).json()["id"]
        replies = [
            await send(client, first, f"message {n} about the harbour") for n in range(TURNS)
        ]
        other = (await client.post("/api/chat/sessions", json={})).json()["id"]
        await send(client, other, "a different conversation")
        usage = (await client.get("/api/usage")).json()["days"][0]

    log = server.cache_log
    assert len(log) == TURNS + 1
    for turn in range(1, TURNS):  # each turn reads all of the turn before it but its context
        assert log[turn].read_tokens >= log[turn - 1].prompt_tokens - 10  # (the time: 5 words)
        assert log[turn].read_tokens < log[turn].prompt_tokens
    reported = [reply["usage"] for reply in replies]
    assert [u["cached_tokens"] for u in reported] == [o.read_tokens for o in log[:TURNS]]
    assert [u["cache_write_tokens"] for u in reported] == [o.written_tokens for o in log[:TURNS]]
    assert usage["cached_tokens"] == sum(o.read_tokens for o in log)
    assert usage["cache_write_tokens"] == sum(o.written_tokens for o in log)
    if kind == "openai":
        keys = [request.body["prompt_cache_key"] for request in server.requests]
        assert len(set(keys[:TURNS])) == 1 and keys[TURNS] != keys[0]  # one per session
        assert first not in keys[0] and "default" not in keys[0]  # naming neither
        assert log[TURNS].read_tokens == 0  # another session's key: another pool
    else:
        assert log[0].written_tokens > 0  # the first turn writes what the second reads


async def test_a_vendor_not_known_to_take_prompt_cache_key_is_not_sent_it(
    database_url: str, tmp_path: Path
) -> None:
    with FakeOpenAIServer() as server:
        settings = cache_settings(database_url, tmp_path, "openai", server)
        settings.providers["llm"] = settings.providers["llm"].model_copy(
            update={"prompt_cache_key": None}  # the default: on for api.openai.com only
        )
        async with serve(create_app(settings)) as client:
            session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
            await send(client, session_id, "hello")
    assert "prompt_cache_key" not in server.requests[-1].body
