"""A DingTalk robot when DingTalk misbehaves: a gateway that hangs or says nothing never stops
the server from serving or from shutting down within ten seconds; a dropped connection is
opened again; rate limits, an expired token and refused credentials are waited out, renewed
or reported."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.channels.conftest import CLIENT_ID, ServedRobot, serving_robot
from tests.fakes import HttpError
from tests.fakes.dingtalk_server import QPS_LIMITED, FakeDingTalkServer

SHUTDOWN_LIMIT_S = 10.0


@asynccontextmanager
async def timed_shutdown(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str, **options: object
) -> AsyncIterator[tuple[ServedRobot, list[float]]]:
    """Serve the robot; after the block, the seconds the server took to shut down."""
    took: list[float] = []
    async with serving_robot(dingtalk, tmp_path, database_url, **options) as served:  # type: ignore[arg-type]
        yield served, took
        started = time.monotonic()
    took.append(time.monotonic() - started)


async def health(served: ServedRobot) -> dict[str, object]:
    answer = await served.client.get("/api/health")
    assert answer.status_code in (200, 503)
    (robot,) = [c for c in answer.json()["channels"] if c["bot"] == "dt"]
    return dict(robot)


@pytest.mark.parametrize("where", ["open", "handshake"])
async def test_a_hung_gateway_blocks_neither_serving_nor_shutdown(
    where: str, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    if where == "open":
        dingtalk.hang("open")
    else:
        dingtalk.hang_websocket_handshake = True
    async with timed_shutdown(dingtalk, tmp_path, database_url, connected=False) as (served, took):
        await asyncio.to_thread(dingtalk.wait_until, lambda d: d.open_calls >= 1, "an open call")
        status = await health(served)
        sessions = await served.client.get("/api/chat/sessions")
    assert status["connected"] is False
    assert sessions.status_code == 200
    assert took[0] < SHUTDOWN_LIMIT_S


async def test_a_silent_gateway_and_a_hung_send_do_not_hold_up_shutdown(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    dingtalk.hang("session")
    async with timed_shutdown(dingtalk, tmp_path, database_url) as (served, took):
        await served.acked(await served.push(served.message("answer me")))
        await asyncio.to_thread(
            dingtalk.wait_until, lambda d: d.calls("session") >= 1, "reply on its way"
        )
    assert took[0] < SHUTDOWN_LIMIT_S
    assert dingtalk.sent() == []  # it was never delivered: the next start sends it


async def test_a_dropped_connection_and_a_disconnect_request_are_reconnected(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        dingtalk.drop_connections(CLIENT_ID)
        await asyncio.to_thread(dingtalk.wait_connected, CLIENT_ID, 2)
        await served.push(served.message("after a drop"))
        await served.sent(1)
        await asyncio.to_thread(dingtalk.push_system_disconnect, CLIENT_ID)
        await asyncio.to_thread(dingtalk.wait_connected, CLIENT_ID, 3)
        await served.push(served.message("after a disconnect"))
        await served.sent(2)
        stored = await served.stored()
    assert [t for r, t in stored if r == "user"] == ["after a drop", "after a disconnect"]


async def test_rate_limits_are_waited_out(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        dingtalk.fail_next("session", errcode=130101)  # send too fast
        await served.push(served.message("by webhook"))
        (by_webhook,) = await served.sent(1)
        dingtalk.fail_next("batchSend", QPS_LIMITED)
        dingtalk.fail_next("batchSend", HttpError(503, "busy"))
        await served.push(served.message("by openapi", webhook_expires_in_s=-1))
        _, by_openapi = await served.sent(2)
    assert by_webhook.via == "session" and by_openapi.via == "batchSend"
    assert by_openapi.text == "Hello from Tally."


async def test_an_access_token_dingtalk_no_longer_takes_is_renewed(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        await served.push(served.message("first", webhook_expires_in_s=-1))
        await served.sent(1)
        dingtalk.expire_tokens()
        await served.push(served.message("second", webhook_expires_in_s=-1))
        await served.sent(2)
    assert dingtalk.token_requests == 2
    assert [s.via for s in dingtalk.sent()] == ["batchSend", "batchSend"]


async def test_refused_credentials_are_reported_and_the_server_serves_on(
    dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DT_CLIENT_SECRET", "not-the-secret")
    async with serving_robot(dingtalk, tmp_path, database_url, connected=False) as served:
        await asyncio.to_thread(dingtalk.wait_until, lambda d: d.open_calls >= 1, "an open call")
        status = await health(served)
        for _ in range(6000):  # the refusal is noted just after it arrived
            if status["last_error"]:
                break
            await asyncio.sleep(0.01)
            status = await health(served)
        sessions = await served.client.get("/api/chat/sessions")
    assert status["connected"] is False
    assert "401" in str(status["last_error"]) and str(status["last_error"]).startswith("connect")
    assert sessions.status_code == 200
