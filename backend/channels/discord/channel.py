"""One tenant's Discord bot, on discord.py: the hooks over the bot skeleton (`channels/bot.py`).
Messages arrive over the gateway (the leader's connection, `gateway.py`) and are kept by their
id before anything answers them; replies go over the REST API from any process.

A channel is a session (`<bot>:<channel id>`): a direct message keeps its person's memory
(`discord:<user id>`), a server's channel shares the tenant's.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp

from backend.channels.backoff import Sleep
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall
from backend.channels.bot import Envelope, PlatformBot
from backend.channels.commands import ChatRef, Request, answers_a_question, is_allowed
from backend.channels.discord.gateway import ERRORS, GatewayConnection, point_at, rest_client
from backend.channels.discord.inbound import (
    DiscordMessage,
    Press,
    parse,
    read_message,
    update_id_of,
    user_key,
)
from backend.channels.discord.outbound import ChannelReplies, Origin, Outbox, owner_and_data
from backend.channels.discord.sdk import discord
from backend.chat.user_input import image_part, image_type
from backend.domain.inbound import Sender
from backend.domain.messages import ImagePart
from backend.settings.channels_discord import DiscordSettings
from backend.storage.channel_updates import UpdateOutcome

log = logging.getLogger(__name__)

NOT_YOURS = "These buttons are for <@{owner}>."
NOT_ALLOWED = "This bot does not take your answers."


class DiscordChannel(PlatformBot[DiscordSettings, DiscordMessage, str]):
    KIND = "discord"
    PLATFORM_ERRORS = ERRORS
    CONNECTION_STEPS = ("connect", "gateway")
    PICTURE_ERRORS = (discord.HTTPException, aiohttp.ClientError)
    PICTURE_UNAVAILABLE = "I could not fetch that picture from Discord; please send it again."
    CAN_APPROVE = True  # asked with buttons

    def _set_up(self, sleep: Sleep) -> None:
        point_at(self.settings)
        self._client = rest_client(self.settings)
        self._outbox = Outbox(self._client)
        self._gateway = GatewayConnection(
            self.settings,
            status=self.status,
            keep=self._keep_received,
            on_error=self._failed,
            sleep=sleep,
        )

    # ---- lifecycle ------------------------------------------------------------------------

    async def _connect(self) -> None:
        """Logged in (GET /users/@me: the bot's id names its mentions) before answering."""
        await self._until_it_works("connect", self._login)

    async def _login(self) -> None:
        await self._client.login(self.settings.token() or "")

    async def _receive(self) -> None:
        await self._as_leader(self._gateway.run)  # one gateway session of all processes

    async def _stop_receiving(self) -> None:
        await self._gateway.aclose()

    async def _close(self) -> None:
        await self._outbox.aclose()
        await self._client.close()

    # ---- receiving ------------------------------------------------------------------------

    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        return NO_SUCH_BOT  # Discord delivers a bot's messages over the gateway only

    def _platform_id_of(self, payload: object) -> str | None:
        return update_id_of(payload)

    def _read(self, payload: dict[str, Any]) -> str:
        parse(payload)
        platform_id = update_id_of(payload)
        assert platform_id is not None  # parse read it
        return platform_id

    async def _message(self, payload: dict[str, Any]) -> DiscordMessage | UpdateOutcome:
        read = parse(payload)
        if read is None:
            return "ignored"  # an interaction that is no button press
        if isinstance(read, Press):
            await self._press(read)
            return "answered"
        return read

    async def _press(self, press: Press) -> None:
        """A button under one of the bot's messages: answered for the person it was for."""
        owner, data = owner_and_data(press.custom_id)
        if not is_allowed((press.user_id,), self.settings.allow_from):
            await self._outbox.respond(
                press.interaction_id, press.token, NOT_ALLOWED, to_presser_only=True
            )
            return
        if owner != press.user_id:
            said = NOT_YOURS.format(owner=owner)
            await self._outbox.respond(
                press.interaction_id, press.token, said, to_presser_only=True
            )
            return
        chat = self._chat(press.channel_id, None if press.guild_id else user_key(press.user_id))
        said = await self._commands.press(data, chat)
        shown = f"{press.message_text}\n\n{said}" if answers_a_question(data) else said
        await self._outbox.respond(press.interaction_id, press.token, shown, to_presser_only=False)

    # ---- answering ------------------------------------------------------------------------

    def _request(self, message: DiscordMessage) -> Request:
        user = self._client.user
        return read_message(message, self.settings, bot_id=str(user.id) if user else "")

    def _chat_of(self, message: DiscordMessage) -> ChatRef:
        return self._chat(message.channel_id, None if message.is_group else message.user_key)

    def _replies(self, message: DiscordMessage) -> ChannelReplies:
        origin = Origin(
            channel_id=message.channel_id,
            message_id=message.message_id,
            guild_id=message.guild_id,
            author_id=message.author_id,
        )
        return ChannelReplies(self._outbox, origin, count_reply=self._count_reply)

    def _envelope(self, message: DiscordMessage) -> Envelope:
        return Envelope(
            message_id=message.message_id,
            sender=Sender(message.author_id, message.author_name),
            is_group=message.is_group,
        )

    async def _pictures(self, message: DiscordMessage) -> tuple[ImagePart, ...]:
        images = []
        for url, content_type in message.pictures:
            raw = await self._client.http.get_from_cdn(url)
            images.append(image_part(image_type(raw) or content_type, raw))
        return tuple(images)
