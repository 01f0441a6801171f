"""Rate limits and token quotas, with a controlled clock, and usage accounting over HTTP."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from limits.aio.storage import MemoryStorage

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.storage.database import Database
from backend.storage.migrate import migrate
from backend.storage.usage import UsageDay, UsageRepository, add_usage
from backend.tenancy.quotas import RateLimited, RequestRateLimiter, TokenQuota
from tests.conftest import make_settings, serve
from tests.fakes.summarizer import EchoSummarizer


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_requests_per_minute_slide_with_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(1_800_000_000.0)
    monkeypatch.setattr(time, "time", clock)  # the limiter's window and our Retry-After
    limiter = RequestRateLimiter(MemoryStorage())
    for _ in range(3):
        await limiter.admit("acme", per_minute=3)
        clock.now += 10
    with pytest.raises(RateLimited) as caught:
        await limiter.admit("acme", per_minute=3)
    assert caught.value.status == 429 and caught.value.retry_after == pytest.approx(30)
    await limiter.admit("globex", per_minute=3)  # another tenant has its own window
    clock.now += 30.001  # the first request leaves the window
    await limiter.admit("acme", per_minute=3)
    await limiter.admit("acme", per_minute=None)  # no limit configured


async def test_token_quota_renews_at_utc_midnight(database_url: str) -> None:
    database = Database(database_url)
    await migrate(database)
    today = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
    await database.run_write(
        add_usage,
        UsageDay(
            "acme",
            today.date(),
            turns=2,
            prompt_tokens=60,
            completion_tokens=30,
            summarizer_tokens=10,
        ),
    )
    now = today
    quota = TokenQuota(UsageRepository(database), clock=lambda: now)
    await quota.check("acme", per_day=101)
    with pytest.raises(RateLimited) as caught:
        await quota.check("acme", per_day=100)
    assert caught.value.code == "token_quota_exceeded"
    assert caught.value.retry_after == pytest.approx(2 * 3600)
    now = today + timedelta(hours=2, seconds=1)  # a new UTC day
    await quota.check("acme", per_day=100)
    await database.dispose()


async def test_quotas_answer_429_with_retry_after_and_usage_is_accounted(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2},
        quotas={"tokens_per_day": 10_000},
        tenants={"default": {"quotas": {"requests_per_minute": 12, "tokens_per_day": 600}}},
    )
    app = create_app(
        settings,
        provider=ScriptedProvider(replies=["a reply of five words"]),
        summarizer_provider=EchoSummarizer(),
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        statuses = []
        for i in range(10):
            response = await client.post(
                "/api/chat/send", json={"session_id": session_id, "message": f"hello number {i}"}
            )
            statuses.append(response.status_code)
            if response.status_code == 429:
                break
        await app.state.services.runtimes.wait_idle()
        quota_hit = response
        used = (await client.get("/api/usage")).json()["days"]
        admin_view = (await client.get("/api/admin/usage")).json()["days"]
        responses = [await client.get("/api/chat/sessions") for _ in range(10)]
    assert statuses[-1] == 429 and statuses.count(200) >= 3
    assert quota_hit.json()["error"]["code"] == "token_quota_exceeded"
    assert int(quota_hit.headers["Retry-After"]) > 0
    (day,) = used
    assert day["turns"] == statuses.count(200)
    assert day["prompt_tokens"] > 0 and day["completion_tokens"] == 5 * day["turns"]
    assert day["summarizer_tokens"] > 0  # the summarizer is charged to the tenant
    assert admin_view == used
    limited = [r for r in responses if r.status_code == 429]
    assert limited and limited[0].json()["error"]["code"] == "rate_limited"
    assert int(limited[0].headers["Retry-After"]) >= 1
