"""Telling people when memory is degraded (issue 13, item 2): while a session's summaries keep
failing, or memory cannot be read, each turn says so (a `memory.degraded` event, and
`memory_problem` in a JSON reply), `/api/health` is degraded with the reason (where, only for
administrators), and `/metrics` counts it, until it recovers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backend.app import create_app
from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider
from tests.api.test_auth import ADMIN_KEY, bearer
from tests.conftest import make_settings, serve
from tests.fakes.summarizer import EchoSummarizer
from tests.sse import stream_turn
from tests.waiting import until


class Switchable(EchoSummarizer):
    """A summarizer that fails until it is switched on."""

    is_working: bool = False

    async def stream(self, request: Any) -> Any:  # type: ignore[override]
        if not self.is_working:
            raise ProviderUnavailable("summarizer", "HTTP 503 (scripted)")
        async for event in super().stream(request):
            yield event


def degraded_gauge(metrics: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith('tally_memory_degraded{tenant="default"}'):
            return float(line.split()[-1])
    return None


async def test_failing_summaries_are_told_in_each_turn_health_and_metrics_until_they_recover(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2, "retry_base_s": 0.2},
    )
    summarizer = Switchable()
    app = create_app(
        settings, provider=ScriptedProvider(replies=["ok"]), summarizer_provider=summarizer
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for n in range(3):  # 6 messages: the oldest turn is due to be summarized
            await client.post("/api/chat/send", json={"session_id": session_id, "message": f"t{n}"})
        await until(app.state.services.overflow_jobs.failing, "the summary failed", poll_s=0.05)
        events = await stream_turn(client, {"session_id": session_id, "message": "still there?"})
        answered = await client.post(
            "/api/chat/send", json={"session_id": session_id, "message": "and now?"}
        )
        health = (await client.get("/api/health")).json()
        gauge = degraded_gauge((await client.get("/metrics")).text)

        summarizer.is_working = True
        await app.state.services.runtimes.wait_idle()
        after = await stream_turn(client, {"session_id": session_id, "message": "better?"})
        await app.state.services.runtimes.wait_idle()
        healed = (await client.get("/api/health")).json()
        healed_gauge = degraded_gauge((await client.get("/metrics")).text)
    (notice,) = [data for name, data in events if name == "memory.degraded"]
    assert (
        notice["code"] == "summaries_failing" and "remembered once it succeeds" in notice["reason"]
    )
    assert events[-1][0] == "turn.completed"  # the conversation goes on
    assert answered.status_code == 200 and "failed" in answered.json()["memory_problem"]
    assert (health["status"], health["memory"]) == ("degraded", "degraded")
    assert health["memory_problem"] == "summaries failing in 1 session"
    # auth.mode none: everyone is the operator, who sees where (keys mode: the test below)
    assert [(p["session_id"], p["code"]) for p in health["memory_problems"]] == [
        (session_id, "summaries_failing")
    ]
    assert gauge == 1.0
    assert not [name for name, _ in after if name == "memory.degraded"]
    assert (healed["memory"], healed["memory_problem"]) == ("ok", None)
    assert healed_gauge == 0.0


async def test_unreadable_memory_is_told_and_shown_to_an_operator_in_health(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the memory folder should be", encoding="utf-8")
    settings = make_settings(
        f"sqlite+aiosqlite:///{tmp_path}/t.db",
        tmp_path,
        auth={"mode": "keys"},
        memory={"path": str(blocker / "MEMORY.md")},
    )
    app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
    operator = bearer(ADMIN_KEY)
    async with serve(app) as client:
        key = await client.post(
            "/api/admin/tenants/default/keys", json={"scope": "chat"}, headers=operator
        )
        chat = bearer(key.json()["key"])
        events = await stream_turn(client, {"message": "hello"}, headers=chat)
        as_tenant = (await client.get("/api/health", headers=chat)).json()
        as_operator = (await client.get("/api/health", headers=operator)).json()
        public = (await client.get("/api/health")).json()
    (notice,) = [data for name, data in events if name == "memory.degraded"]
    assert notice["code"] == "memory_unreadable"
    assert public["memory"] == "degraded" and public["memory_problems"] == []
    assert as_tenant["memory_problems"] == []  # a chat key is no administrator
    assert [(p["tenant_id"], p["code"]) for p in as_operator["memory_problems"]] == [
        ("default", "memory_unreadable")
    ]
