"""An intelligent robot's long connection (`mode: robot`), with the maintained
`wecom-aibot-python-sdk` (`aibot`): Tally connects out to WeCom's websocket (no public
address), subscribes with the robot's id and secret, and receives each message as a frame;
replies go back on the same connection, answering the message's `req_id`.

The SDK runs the connection: its heartbeat, and reconnecting with backoff (told here to try
for ever). Its `connect()` always hands websockets its own TLS context, which websockets
refuses for a `ws://` address (a private deployment's, or a test's): for one, the SDK's
context is set to None, so websockets uses the system's default for any `wss://` address.
A message is kept before anything else is done with it (WeCom does not deliver a frame again,
so one that cannot be kept is noted as an error and lost).
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

with warnings.catch_warnings():  # aibot imports websockets' legacy client protocol by name
    warnings.simplefilter("ignore", DeprecationWarning)
    import aibot.ws
    from aibot import WSClient, WSClientOptions

from backend.channels.base import ChannelStatus
from backend.channels.wecom.api import WeComError
from backend.settings.channels_wecom import WeComSettings

log = logging.getLogger(__name__)

Keep = Callable[[object], Awaitable[None]]
OnError = Callable[[str, BaseException], None]


class RobotConnection:
    def __init__(
        self, settings: WeComSettings, *, status: ChannelStatus, keep: Keep, on_error: OnError
    ) -> None:
        if settings.ws_url.startswith("ws://"):
            aibot.ws._SSL_CONTEXT = None
        self._status = status
        self._keep = keep
        self._on_error = on_error
        options = WSClientOptions(
            bot_id=settings.bot_id or "",
            secret=settings.bot_secret() or "",
            ws_url=settings.ws_url,
            max_reconnect_attempts=-1,  # a robot that stops trying is deaf until a restart
            logger=_Logger(),
        )
        self._client = WSClient(options)
        self._client.on("authenticated", self._authenticated)
        self._client.on("disconnected", self._disconnected)
        self._client.on("error", lambda error: on_error("connect", error))
        self._client.on("message", self._received)
        self._client.on("event", self._received)
        self._started = False

    async def run(self) -> None:
        """Connected until cancelled (the SDK reconnects a lost connection)."""
        self._started = True
        try:
            await self._client.connect()
            await asyncio.Future()  # until cancelled
        finally:
            self.close()

    def close(self) -> None:
        if self._started:
            self._started = False
            self._client.disconnect()
            self._status.is_connected = False

    async def reply_stream(self, frame: dict[str, Any], content: str) -> None:
        """`content` as one finished stream message answering `frame`'s message."""
        stream_id = f"tally-{asyncio.get_running_loop().time():.6f}"
        await self._sent(self._client.reply_stream(frame, stream_id, content, finish=True))

    async def reply_card(self, frame: dict[str, Any], card: dict[str, Any]) -> None:
        """A template card (buttons) answering `frame`'s message."""
        await self._sent(self._client.reply_template_card(frame, card))

    async def update_card(self, frame: dict[str, Any], card: dict[str, Any]) -> None:
        """The card a button of was pressed (`frame`, the press) replaced by `card`."""
        await self._sent(self._client.update_template_card(frame, card))

    async def _sent(self, reply: Awaitable[Any]) -> None:
        try:
            await reply
        except (RuntimeError, TimeoutError) as exc:  # not connected, refused, no ack in 5 s
            raise WeComError(f"the robot's reply: {exc}", errcode=-1) from exc

    def _authenticated(self) -> None:
        self._status.is_connected = True
        log.info("wecom %s: robot subscribed", self._status.bot)

    def _disconnected(self, reason: str) -> None:
        self._status.is_connected = False
        self._on_error("connect", ConnectionError(f"disconnected: {reason}"))

    async def _received(self, frame: object) -> None:
        try:
            await self._keep(frame)
        except Exception as exc:  # not kept: noted, since WeCom does not deliver it again
            self._on_error("receive", exc)


async def subscribe_once(settings: WeComSettings, *, timeout_s: float = 10.0) -> str:
    """`tally doctor`'s look: open the connection once and subscribe; what WeCom said, or
    ValueError (it refused the id or secret) / OSError (unreachable, or no answer)."""
    if settings.ws_url.startswith("ws://"):
        aibot.ws._SSL_CONTEXT = None
    said: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def failed(error: BaseException) -> None:
        if not said.done():
            said.set_exception(error)

    def subscribed() -> None:
        if not said.done():
            said.set_result(None)

    client = WSClient(
        WSClientOptions(
            bot_id=settings.bot_id or "",
            secret=settings.bot_secret() or "",
            ws_url=settings.ws_url,
            max_reconnect_attempts=0,  # doctor reports; serving retries
            logger=_Logger(),
        )
    )
    client.on("authenticated", subscribed)
    client.on("error", failed)
    try:
        await client.connect()
        await asyncio.wait_for(said, timeout_s)
    except TimeoutError as exc:
        raise OSError(
            f"{settings.ws_url} did not answer the subscription in {timeout_s:.0f} s"
        ) from exc
    except Exception as exc:
        if str(exc).startswith("Authentication failed"):
            raise ValueError(f"{settings.ws_url} refused the robot: {exc}") from exc
        raise OSError(f"cannot reach {settings.ws_url}: {exc}") from exc
    finally:
        client.disconnect()
    return f"robot {settings.bot_id}, subscribed"


class _Logger:
    """The SDK's log lines, into ours."""

    def debug(self, message: str, *args: object) -> None:
        log.debug("aibot: %s", message)

    def info(self, message: str, *args: object) -> None:
        log.info("aibot: %s", message)

    def warn(self, message: str, *args: object) -> None:
        log.warning("aibot: %s", message)

    def error(self, message: str, *args: object) -> None:
        log.warning("aibot: %s", message)
