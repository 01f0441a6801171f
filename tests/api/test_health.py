"""`GET /api/health` reports each provider's latest real call, and never calls one itself."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from tests.conftest import make_settings, serve
from tests.fakes.openai_server import FakeOpenAIServer
from tests.waiting import until

GENEROUS_S = 60.0


def provider_row(url: str) -> dict[str, Any]:
    return {
        "kind": "openai_compatible",
        "base_url": url,
        "max_retries": 0,  # one attempt per turn: the outcome of each is plain
        "timeout_s": GENEROUS_S,
        "connect_timeout_s": GENEROUS_S,
    }


def entry(health: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [provider for provider in health["providers"] if provider["name"] == name]
    return found


async def test_health_shows_a_refused_provider_until_a_call_succeeds(
    sqlite_url: str, tmp_path: Path
) -> None:
    held = socket.socket()  # bound, not listening: refused, and no other process takes it
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    settings = make_settings(
        sqlite_url,
        tmp_path,
        providers={"myvendor": provider_row(url)},
        model={"provider": "myvendor", "name": "test-model"},
    )
    async with serve(create_app(settings)) as client:
        before = (await client.get("/api/health")).json()
        failed = await client.post("/api/chat/send", json={"message": "hello?"})
        during = await client.get("/api/health")
        held.close()
        with FakeOpenAIServer(port=port):  # the vendor comes up on the same port
            answered = await client.post("/api/chat/send", json={"message": "hello again"})
            after = (await client.get("/api/health")).json()

    assert before["status"] == "ok"
    assert entry(before, "myvendor") == {
        "name": "myvendor",
        "base_url": url,
        "last_outcome": "unknown",
        "last_error_code": None,
        "last_error": None,
        "last_at": None,
    }
    refused = f"myvendor ({url}): connection refused"
    assert failed.json()["error"] == {"code": "provider_unavailable", "message": refused}
    assert during.status_code == 200  # the server is alive; only the database makes a 503
    assert during.json()["status"] == "degraded" and during.json()["database"] == "ok"
    assert entry(during.json(), "myvendor") | {"last_at": None} == {
        "name": "myvendor",
        "base_url": url,
        "last_outcome": "error",
        "last_error_code": "provider_unavailable",
        "last_error": refused,
        "last_at": None,
    }
    assert entry(during.json(), "myvendor")["last_at"] is not None
    assert answered.status_code == 200
    assert after["status"] == "ok"
    assert entry(after, "myvendor")["last_outcome"] == "ok"
    assert entry(after, "myvendor")["last_error"] is None


async def test_health_never_calls_the_provider(sqlite_url: str, tmp_path: Path) -> None:
    with FakeOpenAIServer() as vendor:
        settings = make_settings(
            sqlite_url,
            tmp_path,
            providers={"myvendor": provider_row(vendor.base_url)},
            model={"provider": "myvendor", "name": "test-model"},
        )
        async with serve(create_app(settings)) as client:
            probes = [await client.get("/api/health") for _ in range(5)]
        calls = vendor.requests

    assert calls == []
    assert {probe.json()["status"] for probe in probes} == {"ok"}
    assert {entry(probe.json(), "myvendor")["last_outcome"] for probe in probes} == {"unknown"}


async def test_a_failing_summary_provider_shows_without_degrading_chat(
    sqlite_url: str, tmp_path: Path, refused_port: int
) -> None:
    summaries_url = f"http://127.0.0.1:{refused_port}/v1"
    with FakeOpenAIServer() as vendor:
        settings = make_settings(
            sqlite_url,
            tmp_path,
            providers={
                "myvendor": provider_row(vendor.base_url),
                "summaries": provider_row(summaries_url),
            },
            model={"provider": "myvendor", "name": "test-model"},
            summarizer={"provider": "summaries", "name": "small-model"},
            persona={"max_history_messages": 4},
            memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2},
        )
        async with serve(create_app(settings)) as client:
            session = (await client.post("/api/chat/sessions", json={})).json()["id"]
            for turn in range(4):  # past the window: older messages go to a summary
                sent = await client.post(
                    "/api/chat/send", json={"session_id": session, "message": f"turn {turn}"}
                )
                assert sent.status_code == 200
            health = await wait_for_outcome(client, "summaries")

    # The chat model's provider is fine: only memory (summaries failing, once the failure is
    # journaled) can make the status degraded.
    assert health["status"] == ("degraded" if health["memory"] == "degraded" else "ok")
    assert entry(health, "myvendor")["last_outcome"] == "ok"
    summaries = entry(health, "summaries")
    assert summaries["last_error_code"] == "provider_unavailable"
    assert summaries["last_error"] == f"summaries ({summaries_url}): connection refused"


async def wait_for_outcome(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    """Health once provider `name` has an outcome; summaries run in the background."""

    async def called() -> dict[str, Any] | None:
        health: dict[str, Any] = (await client.get("/api/health")).json()
        return health if entry(health, name)["last_outcome"] != "unknown" else None

    return await until(called, f"a call to {name}", timeout_s=GENEROUS_S, poll_s=0.05)
