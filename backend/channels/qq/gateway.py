"""A bot's websocket gateway connection: Tally connects out to QQ (no public address needed)
and receives events as dispatches on a websocket.

The protocol (QQ's, read from qq-botpy-sdk's gateway): `GET /gateway` names the URL; QQ says
HELLO (op 10, `heartbeat_interval` in ms); the bot IDENTIFYs (op 2: `QQBot <token>`, intents,
shard) or, after a drop, RESUMEs (op 6: the session and the last sequence number it has); it
beats (op 1, with that number) and QQ answers (op 11). Dispatches (op 0) carry `s`, the
sequence number: each is kept in the inbox before the next is read, and only then counts as
had, so a RESUME after a drop asks QQ again for any that were not kept. RECONNECT (op 7) and
INVALID_SESSION (op 9: start a new session) close the connection and open another.

The SDK's gateway (botpy/gateway.py) is not used: it too counts a dispatch only after its raw
handler returns, but it runs inside the SDK's `Client` lifecycle (its own login, HTTP client and
token cache, session store and reconnect policy), a second of each beside `openapi.py`'s; this
small client speaks the same opcodes under the skeleton's leadership, backoff and status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import websockets

from backend.channels.backoff import Backoff, Sleep
from backend.channels.base import ChannelStatus
from backend.channels.platform_body import RefusedUpdate, fingerprint, read_body
from backend.channels.qq.openapi import QQApi, QQError

log = logging.getLogger(__name__)

DISPATCH, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = (
    0, 1, 2, 6, 7, 9, 10, 11,
)  # fmt: skip
INTENTS = 1 << 25  # GROUP_AND_C2C_EVENT: group @-messages and private messages
HANDSHAKE_TIMEOUT_S = 10.0
HELLO_TIMEOUT_S = 20.0

Keep = Callable[[object], Awaitable[None]]  # raises when the event was not kept
Refuse = Callable[[str, str], Awaitable[None]]  # (a name for the frame, why): recorded
OnError = Callable[[str, BaseException], None]


class Reconnect(Exception):
    """QQ asked for a new connection (op 7, op 9), or stopped answering heartbeats."""


class GatewayConnection:
    def __init__(
        self,
        api: QQApi,
        *,
        status: ChannelStatus,
        keep: Keep,
        refuse: Refuse,
        on_error: OnError,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._api = api
        self._status = status
        self._keep = keep
        self._refuse = refuse
        self._on_error = on_error
        self._sleep = sleep
        self._session_id: str | None = None
        self._seq: int | None = None  # the last dispatch kept
        self._acked = True  # the last heartbeat was answered

    async def run(self) -> None:
        """Connected until cancelled: each lost connection is opened again (resumed), with
        backoff."""
        backoff = Backoff(sleep=self._sleep)
        while True:
            try:
                await self._connected(backoff)
            except (OSError, QQError, websockets.WebSocketException, ValueError) as exc:
                self._on_error("connect", exc)
            except Reconnect as exc:
                log.info("qq %s: reconnecting: %s", self._status.bot, exc)
            finally:
                self._status.is_connected = False
            await backoff.wait()

    async def _connected(self, backoff: Backoff) -> None:
        url = await self._api.gateway_url()
        async with websockets.connect(
            url, open_timeout=HANDSHAKE_TIMEOUT_S, ping_interval=None, close_timeout=2
        ) as websocket:
            hello = await _frame(await asyncio.wait_for(websocket.recv(), HELLO_TIMEOUT_S))
            if hello.get("op") != HELLO:
                raise ValueError(f"the gateway said op {hello.get('op')} before HELLO")
            interval = _interval_s(hello.get("d"))
            await websocket.send(json.dumps(await self._hello_answer()))
            self._acked = True
            beating = asyncio.create_task(self._beat(websocket, interval))
            try:
                async for raw in websocket:
                    await self._on_frame(websocket, raw, backoff)
            finally:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError, websockets.WebSocketException):
                    await beating

    async def _hello_answer(self) -> dict[str, Any]:
        token = f"QQBot {await self._api.access_token()}"
        if self._session_id is not None and self._seq is not None:
            return {
                "op": RESUME,
                "d": {"token": token, "session_id": self._session_id, "seq": self._seq},
            }
        identify = {"token": token, "intents": INTENTS, "shard": [0, 1], "properties": {}}
        return {"op": IDENTIFY, "d": identify}

    async def _beat(self, websocket: Any, interval: float) -> None:
        """A heartbeat every interval (on the real clock: it keeps time with QQ, not with a
        test's); a beat QQ has not answered by the next one means the link is dead."""
        while True:
            await asyncio.sleep(interval)
            if not self._acked:
                log.info("qq %s: heartbeat not answered; reconnecting", self._status.bot)
                await websocket.close()
                return
            self._acked = False
            await websocket.send(json.dumps({"op": HEARTBEAT, "d": self._seq}))

    async def _on_frame(self, websocket: Any, raw: str | bytes, backoff: Backoff) -> None:
        try:
            frame = await _frame(raw)
        except RefusedUpdate as exc:
            data = raw.encode() if isinstance(raw, str) else raw
            await self._refuse(fingerprint(data), exc.reason)
            return
        op = frame.get("op")
        if op == DISPATCH:
            await self._dispatch(frame, backoff)
        elif op == HEARTBEAT_ACK:
            self._acked = True
        elif op == HEARTBEAT:  # QQ asks for a beat now
            await websocket.send(json.dumps({"op": HEARTBEAT, "d": self._seq}))
        elif op == RECONNECT:
            raise Reconnect("the gateway asked for a new connection")
        elif op == INVALID_SESSION:
            self._session_id, self._seq = None, None
            raise Reconnect("the session is no longer valid")

    async def _dispatch(self, frame: dict[str, Any], backoff: Backoff) -> None:
        kind, data, seq = frame.get("t"), frame.get("d"), frame.get("s")
        if kind == "READY" and isinstance(data, dict):
            session = data.get("session_id")
            self._session_id = session if isinstance(session, str) else None
            self._ready(backoff)
        elif kind == "RESUMED":
            self._ready(backoff)
        else:
            try:
                await self._keep(frame)
            except Exception as exc:  # not kept: a new connection resumes before it
                self._on_error("receive", exc)
                raise Reconnect("an event could not be kept") from exc
        if isinstance(seq, int) and not isinstance(seq, bool):
            self._seq = seq

    def _ready(self, backoff: Backoff) -> None:
        self._status.is_connected = True
        backoff.reset()
        log.info("qq %s: connected", self._status.bot)


async def _frame(raw: str | bytes) -> dict[str, Any]:
    return read_body(raw.encode() if isinstance(raw, str) else raw)


def _interval_s(data: object) -> float:
    value = data.get("heartbeat_interval") if isinstance(data, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or not 1_000 <= value <= 600_000:
        raise ValueError(f"the gateway's HELLO has no heartbeat_interval: {data}")
    return value / 1000
