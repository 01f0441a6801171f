"""Two Tally apps (two processes' worth: a coordinator, pools and turn runner each) sharing one
PostgreSQL database and one Redis: a cancel sent to either stops a turn the other runs, the
requests-per-minute limit is one window across both, and health says when Redis is gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.errors import ConfigError
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.sse import read_events


@asynccontextmanager
async def two_processes(
    postgres: str,
    tmp_path: Path,
    coordination: dict[str, Any],
    providers: tuple[ScriptedProvider, ScriptedProvider] | None = None,
    **sections: Any,
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    settings = make_settings(
        postgres,
        tmp_path,
        coordination=coordination,
        memory={"store": "database"},
        **sections,
    )
    first, second = providers or (ScriptedProvider(), ScriptedProvider())
    async with (
        serve(create_app(settings, provider=first)) as a,
        serve(create_app(settings, provider=second)) as b,
    ):
        yield a, b


async def test_a_cancel_sent_to_either_process_stops_the_turn(
    postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    slow = ScriptedProvider(delay_s=0.05)
    slow.push(" ".join(f"w{i}" for i in range(400)))
    coordination = {"redis_url": redis_url, "key_prefix": redis_prefix}
    async with two_processes(postgres, tmp_path, coordination, (slow, ScriptedProvider())) as (
        a,
        b,
    ):
        session_id = (await a.post("/api/chat/sessions", json={})).json()["id"]
        body = {"session_id": session_id, "message": "long please", "stream": True}
        events: list[tuple[str, dict[str, Any]]] = []
        async with a.stream("POST", "/api/chat/send", json=body) as response:
            async for name, data in read_events(response):
                events.append((name, data))
                if name == "text.delta" and len(events) == 3:
                    cancel = await b.post(f"/api/chat/sessions/{session_id}/cancel")
        after = await b.post(f"/api/chat/sessions/{session_id}/cancel")
    assert cancel.json() == {"cancelled": True}
    assert events[-1][0] == "error" and events[-1][1]["code"] == "cancelled"
    assert after.json() == {"cancelled": False}  # it has ended: nothing left to cancel


async def test_a_requests_per_minute_limit_is_one_window_across_processes(
    postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    coordination = {"redis_url": redis_url, "key_prefix": redis_prefix}
    quotas = {"requests_per_minute": 5}
    async with two_processes(postgres, tmp_path, coordination, quotas=quotas) as (a, b):
        answers = await asyncio.gather(  # each in a new session: every request counts once
            *(client.post("/api/chat/send", json={"message": "hi"}) for client in [a, b] * 5)
        )
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [200] * 5 + [429] * 5
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert 1 <= int(refused.headers["Retry-After"]) <= 60


async def test_without_redis_turns_still_run_and_health_says_why(
    postgres: str, tmp_path: Path
) -> None:
    coordination = {"redis_url": "redis://127.0.0.1:1/0"}  # nothing listens there
    async with two_processes(
        postgres, tmp_path, coordination, quotas={"requests_per_minute": 5}
    ) as (a, b):
        session_id = (await a.post("/api/chat/sessions", json={})).json()["id"]
        sent = await a.post("/api/chat/send", json={"session_id": session_id, "message": "hi"})
        health = await b.get("/api/health")
        cancel = await b.post(f"/api/chat/sessions/{session_id}/cancel")
    assert sent.status_code == 200  # the rate window could not be counted: admitted
    body = health.json()
    assert health.status_code == 200 and body["status"] == "degraded"
    assert body["coordination"] == "redis" and "Redis" in body["coordination_problem"]
    # Whether another process runs a turn there cannot be known: a clear 503, not a guess.
    assert cancel.status_code == 503 and "Retry-After" in cancel.headers
    assert cancel.json()["error"]["code"] == "coordination_unavailable"


def test_a_password_in_the_redis_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="redis_password_env"):
        make_settings(
            "sqlite+aiosqlite:///x.db",
            tmp_path,
            coordination={"redis_url": "redis://:secret@127.0.0.1:6379/0"},
        )
