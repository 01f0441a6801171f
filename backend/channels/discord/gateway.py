"""A Discord bot's gateway connection through discord.py: IDENTIFY, heartbeats, RESUME after a
dropped connection (Discord replays what was dispatched meanwhile), RECONNECT and
INVALID_SESSION are the library's. Tally takes the two dispatches it answers (MESSAGE_CREATE,
INTERACTION_CREATE) as the gateway delivered them, in order, and keeps each in the bot's inbox;
discord.py builds no objects of them and caches no messages.

discord.py reads Discord's addresses from two class attributes (`Route.BASE`, the gateway's
`DEFAULT_GATEWAY`): they are the process's, so `point_at` sets them from a bot's settings (all
bots of one deployment talk to the same Discord; tests point them at a fake).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import yarl

from backend.channels.backoff import Backoff
from backend.channels.base import ChannelStatus
from backend.channels.discord.inbound import EVENTS
from backend.channels.discord.sdk import discord
from backend.settings.channels_discord import DiscordSettings

log = logging.getLogger(__name__)

Keep = Callable[[dict[str, Any]], Awaitable[None]]
OnError = Callable[[str, BaseException], None]
MAX_RATE_LIMIT_WAIT_S = 120.0  # a longer 429 fails the reply (noted) rather than hang it
ERRORS = (discord.DiscordException, aiohttp.ClientError, OSError, asyncio.TimeoutError)


def point_at(settings: DiscordSettings) -> None:
    """discord.py's REST and gateway addresses, from `settings`."""
    base = settings.api_base_url.rstrip("/")
    if discord.http.Route.BASE != base:
        log.info("discord: REST API at %s, gateway at %s", base, settings.gateway_url)
    discord.http.Route.BASE = base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)


def intents(settings: DiscordSettings) -> discord.Intents:
    """Messages in servers and direct messages; the message content (a privileged intent the
    Developer Portal must allow, or Discord closes the connection with 4014)."""
    wanted = discord.Intents.none()
    wanted.guilds = True  # discord.py's state expects it
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = settings.message_content_intent
    return wanted


def rest_client(settings: DiscordSettings) -> discord.Client:
    """A client that only ever calls the REST API (replies; every process has one)."""
    return discord.Client(
        intents=intents(settings), max_messages=None, max_ratelimit_timeout=MAX_RATE_LIMIT_WAIT_S
    )


class _GatewayClient(discord.Client):
    """discord.py's client with the dispatches Tally answers taken as they arrive."""

    def __init__(
        self, settings: DiscordSettings, received: Callable[[str, dict[str, Any]], None]
    ) -> None:
        super().__init__(
            intents=intents(settings), max_messages=None, chunk_guilds_at_startup=False
        )
        parsers = self._connection.parsers
        for event in EVENTS:  # called in the order the gateway delivered them
            parsers[event] = functools.partial(received, event)
        for event in ("READY", "RESUMED"):  # on_ready waits for servers' GUILD_CREATEs first
            parsers[event] = functools.partial(
                _and_then, parsers[event], functools.partial(received, event)
            )


def _and_then(parse: Callable[[Any], None], then: Callable[[Any], None], data: Any) -> None:
    parse(data)
    then(data)


class GatewayConnection:
    def __init__(
        self,
        settings: DiscordSettings,
        *,
        status: ChannelStatus,
        keep: Keep,
        on_error: OnError,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._settings = settings
        self._status = status
        self._keep = keep
        self._on_error = on_error
        self._sleep = sleep
        self._received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._client: _GatewayClient | None = None

    async def run(self) -> None:
        """Connected until cancelled. discord.py resumes and reconnects by itself; a session it
        gives up on (a refused token, a missing intent) is opened again, with backoff."""
        keeper = asyncio.create_task(self._keep_in_order())
        backoff = Backoff(sleep=self._sleep)
        try:
            while True:
                try:
                    await self._connected()
                    backoff.reset()
                except Exception as exc:  # also a frame discord.py could not read: reconnect
                    self._on_error("gateway", exc)
                finally:
                    self._status.is_connected = False
                    await self._close_client()
                await backoff.wait()
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def aclose(self) -> None:
        """After `run()` was cancelled: what was received and not yet kept is kept now (Discord
        would not deliver it again to a new session)."""
        await self._close_client()
        while not self._received.empty():
            await self._keep(self._received.get_nowait())

    async def _connected(self) -> None:
        client = _GatewayClient(self._settings, self._take)
        self._client = client
        client.event(self.on_disconnect)
        await client.login(self._settings.token() or "")
        await client.connect(reconnect=True)

    async def on_disconnect(self) -> None:
        self._status.is_connected = False

    def _take(self, event: str, data: dict[str, Any]) -> None:
        if event in ("READY", "RESUMED"):
            self._status.is_connected = True
            log.info("discord %s: %s", self._status.bot, event.lower())
        else:
            self._received.put_nowait({"t": event, "d": data})

    async def _keep_in_order(self) -> None:
        """Each received dispatch kept, in order; one that cannot be kept yet (the database is
        away) is tried again with backoff, since Discord will not deliver it again."""
        backoff = Backoff(sleep=self._sleep)
        while True:
            payload = await self._received.get()
            while True:
                try:
                    await self._keep(payload)
                    break
                except Exception as exc:
                    self._on_error("receive", exc)
                    await backoff.wait()
            backoff.reset()

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(*ERRORS):
                await client.close()
