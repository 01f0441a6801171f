"""A DingTalk robot when DingTalk misbehaves: a gateway that hangs or says nothing never stops
the server from serving or from shutting down within ten seconds; a dropped connection is
opened again; rate limits, an expired token and refused credentials are waited out, renewed
or reported. And when our own disk is full: a message that cannot be kept is not acknowledged
(Stream) or answered 503 (callback), so DingTalk delivers it again, and it is answered once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.channels.conftest import CLIENT_ID, ServedRobot, robot_settings, serving_robot
from tests.conftest import fill
from tests.fakes import HttpError
from tests.fakes.dingtalk_server import QPS_LIMITED, FakeDingTalkServer
from tests.waiting import until

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


async def wait_for_error(served: ServedRobot, what: str) -> dict[str, object]:
    """The robot's health once its last error is about `what` (noted just after it happened)."""

    async def failed() -> dict[str, object] | None:
        status = await health(served)
        return status if str(status["last_error"] or "").startswith(what) else None

    return await until(failed, f"a {what} error in the robot's health", poll_s=0.01)


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


@pytest.mark.slow
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


@pytest.mark.slow
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
        status = await wait_for_error(served, "connect")
        sessions = await served.client.get("/api/chat/sessions")
    assert status["connected"] is False
    assert "401" in str(status["last_error"]) and str(status["last_error"]).startswith("connect")
    assert sessions.status_code == 200


async def test_a_frame_that_cannot_be_kept_is_not_acknowledged_and_comes_again(
    small_disk: Path, tmp_path: Path, dingtalk: FakeDingTalkServer
) -> None:
    database_url = f"sqlite+aiosqlite:///{small_disk / 'tally.db'}"
    async with serving_robot(dingtalk, tmp_path, database_url) as served:
        message = served.message("kept at last")
        message["padding"] = "x" * 90_000  # more than SQLite may still find in its pages
        filler = fill(small_disk)
        refused = await served.push(message)
        await wait_for_error(served, "receive")
        unacknowledged = refused not in dingtalk.acks()
        filler.unlink()
        again = await served.push(message)  # DingTalk delivers an unacknowledged frame again
        await served.acked(again)
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert unacknowledged
    assert reply.text == "Hello from Tally."
    assert stored == [("user", "kept at last"), ("assistant", "Hello from Tally.")]


async def test_a_callback_that_cannot_be_kept_is_503_and_its_retry_answered_once(
    small_disk: Path, tmp_path: Path, dingtalk: FakeDingTalkServer
) -> None:
    database_url = f"sqlite+aiosqlite:///{small_disk / 'tally.db'}"
    bot = robot_settings(dingtalk, mode="callback")
    async with serving_robot(dingtalk, tmp_path, database_url, bot=bot) as served:
        message = served.message("kept at last")
        message["padding"] = "x" * 90_000
        filler = fill(small_disk)
        refused = await served.callback(message)
        filler.unlink()
        retried = await served.callback(message)
        again = await served.callback(message)
        await served.sent(1)
        await served.settle()
        stored = await served.stored()
    assert refused.status_code == 503 and "Retry-After" in refused.headers
    assert (retried.status_code, again.status_code) == (200, 200)
    assert stored == [("user", "kept at last"), ("assistant", "Hello from Tally.")]
    assert len(dingtalk.sent()) == 1
