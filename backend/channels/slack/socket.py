"""A bot's Socket Mode connection: Tally connects out to Slack (no public address needed) with
the app-level token. `apps.connections.open` gives a one-use wss URL; Slack sends envelopes on
it (`hello`, `events_api`, `interactive`, `disconnect`), and each one with an `envelope_id`
is acknowledged (`{"envelope_id": …}`) only once its update is kept: one that could not be
kept is not acknowledged, and Slack delivers it again.

slack_sdk's aiohttp `SocketModeClient` holds the socket: it pings it, and when it drops, or
Slack says `disconnect`, opens a new URL and connects again. The first URL is asked here, with
backoff, so that a refused token shows in the bot's status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from slack_sdk.errors import SlackClientError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient

from backend.channels.backoff import until_it_works
from backend.channels.base import ChannelStatus
from backend.channels.slack.api import SlackApi, SlackError

log = logging.getLogger(__name__)

PING_EVERY_S = 5.0  # a socket that stops answering pings is replaced after four of them
KEPT_ENVELOPES = ("events_api", "interactive", "slash_commands")
# Slack refused a token (SlackApiError), or was not reached; `url` missing from its answer.
CONNECT_ERRORS = (SlackError, SlackClientError, aiohttp.ClientError, OSError, KeyError)

Keep = Callable[[object], Awaitable[None]]  # raises when the update was not kept
Refuse = Callable[[str, str], Awaitable[None]]  # (a name for it, why)
OnError = Callable[[str, BaseException], None]
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")


class SocketConnection:
    def __init__(
        self,
        api: SlackApi,
        app_token: str,
        *,
        status: ChannelStatus,
        keep: Keep,
        on_error: OnError,
        sleep: Sleep = asyncio.sleep,
        ping_every_s: float = PING_EVERY_S,
    ) -> None:
        self._api = api
        self._app_token = app_token
        self._status = status
        self._keep = keep
        self._on_error = on_error
        self._sleep = sleep
        self._ping_every_s = ping_every_s
        self._client: SocketModeClient | None = None

    async def run(self) -> None:
        """Connected until cancelled (the SDK reconnects a dropped socket)."""
        client = SocketModeClient(
            self._app_token,
            web_client=self._api.client,
            ping_interval=self._ping_every_s,
            logger=log,
        )
        client.message_listeners.append(self._on_message)
        self._client = client
        try:
            await self._until_it_works(self._api.auth_test)  # who the bot is: its mentions
            client.wss_uri = await self._until_it_works(client.issue_new_wss_url)
            await client.connect()  # type: ignore[no-untyped-call]  # the SDK's, unannotated
            log.info("slack %s: connected (Socket Mode)", self._status.bot)
            while True:  # the SDK reconnects; the status follows it
                self._status.is_connected = await client.is_connected()
                await asyncio.sleep(self._ping_every_s)
        finally:
            self._status.is_connected = False
            await self.aclose()

    async def _until_it_works(self, step: Callable[[], Awaitable[T]]) -> T:
        """`step`, its failures noted in the status and tried again with backoff."""
        return await until_it_works(
            step, what="connect", errors=CONNECT_ERRORS, on_error=self._on_error, sleep=self._sleep
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()  # type: ignore[no-untyped-call]

    async def _on_message(
        self, client: AsyncBaseSocketModeClient, message: dict[str, Any], raw: str | None
    ) -> None:
        envelope_id = message.get("envelope_id")
        kind = message.get("type")
        if not isinstance(envelope_id, str) or not envelope_id:
            if kind not in ("hello", "disconnect"):
                log.info("slack %s: an envelope without an id: %.200s", self._status.bot, raw)
            return
        try:
            if kind in KEPT_ENVELOPES:
                await self._keep(message.get("payload"))
            # other envelopes (none Tally subscribes to) are acknowledged and not answered
            await client.send_socket_mode_response({"envelope_id": envelope_id})
        except Exception as exc:  # not kept, or the ACK could not go: Slack delivers it again
            self._on_error("receive", exc)
