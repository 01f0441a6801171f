"""A robot's Stream-mode connection: Tally connects out to DingTalk's gateway (no public
address needed) and receives robot messages as frames on a websocket.

The SDK's client parses the frames, routes them to our handler and sends the ACK after it
returns, which is after the message is kept: an unacknowledged frame is delivered again. Its
own `start()` loop is not used: it opens the connection with a blocking `requests` call without
a timeout, learns its address by connecting to 8.8.8.8, reads the gateway's URL from the
environment once per process, and swallows the first cancellation. Here every step has a
deadline, failures are retried with backoff, and `run()` stops at the first cancel.
"""

from __future__ import annotations

import asyncio
import json
import logging
import platform
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote_plus

import httpx
import websockets
from dingtalk_stream import AckMessage, CallbackHandler, ChatbotMessage, Credential
from dingtalk_stream import DingTalkStreamClient as SdkClient
from dingtalk_stream.frames import Headers
from dingtalk_stream.version import VERSION_STRING

from backend.channels.backoff import Backoff
from backend.channels.base import ChannelStatus
from backend.channels.platform_body import RefusedUpdate, fingerprint, read_body
from backend.settings.channels import DingTalkRobotSettings

log = logging.getLogger(__name__)

OPEN_PATH = "/v1.0/gateway/connections/open"
OPEN_TIMEOUT = httpx.Timeout(10.0)
HANDSHAKE_TIMEOUT_S = 10.0
PING_EVERY_S = 20.0  # a gateway that stops answering pings is dropped after one more interval

Keep = Callable[[dict[str, Any]], Awaitable[None]]  # raises when the message was not kept
Refuse = Callable[[str, str], Awaitable[None]]  # (a name for the frame, why): recorded
OnError = Callable[[str, BaseException], None]


class StreamConnection:
    def __init__(
        self,
        settings: DingTalkRobotSettings,
        *,
        status: ChannelStatus,
        keep: Keep,
        refuse: Refuse,
        on_error: OnError,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._settings = settings
        self._status = status
        self._on_error = on_error
        self._refuse = refuse
        self._sleep = sleep
        self._client = SdkClient(
            Credential(settings.client_id() or "", settings.client_secret() or ""), logger=log
        )
        self._client.register_callback_handler(ChatbotMessage.TOPIC, _RobotMessages(keep))
        self._frames: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Connected until cancelled: each lost connection is opened again, with backoff."""
        backoff = Backoff(sleep=self._sleep)
        while True:
            try:
                await self._connected()
                backoff.reset()  # it was up: the next try need not wait long
            except (OSError, httpx.HTTPError, websockets.WebSocketException, ValueError) as exc:
                self._on_error("connect", exc)
            finally:
                self._status.is_connected = False
            await backoff.wait()

    async def aclose(self) -> None:
        """After `run()` was cancelled: frames in hand are dropped unacknowledged (DingTalk
        delivers them again)."""
        for frame in self._frames:
            frame.cancel()
        await asyncio.gather(*self._frames, return_exceptions=True)

    async def _connected(self) -> None:
        gateway = await self._open()
        uri = f"{gateway['endpoint']}?ticket={quote_plus(gateway['ticket'])}"
        async with websockets.connect(
            uri,
            open_timeout=HANDSHAKE_TIMEOUT_S,
            ping_interval=PING_EVERY_S,
            ping_timeout=PING_EVERY_S,
            close_timeout=2,
        ) as websocket:
            self._client.websocket = websocket
            self._status.is_connected = True
            log.info("dingtalk %s: connected", self._status.bot)
            async for raw in websocket:
                frame = asyncio.create_task(self._route(raw))
                self._frames.add(frame)
                frame.add_done_callback(self._frames.discard)

    async def _open(self) -> dict[str, str]:
        """The gateway's websocket endpoint and a ticket for one connection."""
        body = {
            "clientId": self._settings.client_id() or "",
            "clientSecret": self._settings.client_secret() or "",
            "subscriptions": [{"type": "CALLBACK", "topic": ChatbotMessage.TOPIC}],
            "ua": f"dingtalk-sdk-python/v{VERSION_STRING}-union tally",
            "localIp": "",  # informational; the SDK's way to learn it reaches out to 8.8.8.8
        }
        headers = {"User-Agent": f"DingTalkStream/1.0 Python/{platform.python_version()}"}
        url = self._settings.openapi_base_url.rstrip("/") + OPEN_PATH
        async with httpx.AsyncClient(timeout=OPEN_TIMEOUT) as http:
            response = await http.post(url, json=body, headers=headers)
        if response.status_code != 200:
            raise ValueError(f"the gateway answered {response.status_code}: {response.text[:200]}")
        answer = response.json()
        if not isinstance(answer.get("endpoint"), str) or not isinstance(answer.get("ticket"), str):
            raise ValueError(f"the gateway answered no endpoint and ticket: {answer}")
        return {"endpoint": answer["endpoint"], "ticket": answer["ticket"]}

    async def _route(self, raw: str | bytes) -> None:
        try:
            frame = read_body(raw.encode() if isinstance(raw, str) else raw)
            if await self._refused(frame):
                return
            outcome = await self._client.route_message(frame)
            if outcome == SdkClient.TAG_DISCONNECT:  # the gateway asks us to reconnect
                await self._client.websocket.close()
        except websockets.ConnectionClosed:
            pass  # the ACK could not go out; DingTalk delivers the frame again
        except Exception as exc:  # the message was not kept: no ACK, so it comes again
            self._on_error("receive", exc)

    async def _refused(self, frame: dict[str, Any]) -> bool:
        """A callback frame whose message does not read (before the SDK parses it): recorded
        as refused and acknowledged, since DingTalk would deliver it again and again."""
        data = frame.get("data")
        if frame.get("type") != "CALLBACK" or not isinstance(data, str):
            return False
        try:
            read_body(data.encode())
        except RefusedUpdate as exc:
            await self._refuse(fingerprint(data.encode()), exc.reason)
            ack = AckMessage()
            headers = frame.get("headers")
            ack.headers.message_id = headers.get("messageId") if isinstance(headers, dict) else ""
            ack.headers.content_type = Headers.CONTENT_TYPE_APPLICATION_JSON
            ack.data = {"response": "refused"}
            await self._client.websocket.send(json.dumps(ack.to_dict()))
            return True
        return False


class _RobotMessages(CallbackHandler):  # type: ignore[misc]  # the SDK has no type hints
    def __init__(self, keep: Keep) -> None:
        super().__init__()
        self._keep = keep

    async def process(self, message: Any) -> tuple[int, str]:
        await self._keep(message.data)
        return AckMessage.STATUS_OK, "OK"
