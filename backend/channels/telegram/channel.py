"""One tenant's Telegram bot, on `python-telegram-bot`'s `Bot` (the Bot API client): the hooks
over the bot skeleton (`channels/bot.py`), which keeps each update (by `update_id`) before the
webhook answers 200 or the polling offset moves past it.

A private chat keys memory by person (`telegram:<user id>`); a group shares the tenant's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
from typing import Any

from telegram import BotCommand, Message, Update
from telegram.error import TelegramError
from telegram.request import HTTPXRequest

from backend.channels.backoff import Sleep
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall, error_body
from backend.channels.bot import Envelope, PlatformBot
from backend.channels.commands import DESCRIPTIONS, ChatRef, Request, answers_a_question, is_allowed
from backend.channels.telegram.format import Chunk
from backend.channels.telegram.inbound import read_message, read_update, update_id_of
from backend.channels.telegram.outbound import ChatReplies, Outbox
from backend.channels.telegram.polling import PollingBot
from backend.chat.user_input import image_part
from backend.domain.inbound import Sender
from backend.domain.messages import ImagePart
from backend.settings.channels import TelegramBotSettings
from backend.storage.channel_updates import UpdateOutcome

ALLOWED_UPDATES = ("message", "callback_query")
TELEGRAM_PHOTO_TYPE = "image/jpeg"  # Telegram re-encodes every photo it delivers as JPEG


class TelegramChannel(PlatformBot[TelegramBotSettings, Message, Chunk]):
    KIND = "telegram"
    PLATFORM_ERRORS = (TelegramError, OSError)
    CONNECTION_STEPS = ("connect", "poll")
    PICTURE_ERRORS = (TelegramError,)
    PICTURE_UNAVAILABLE = "I could not fetch that photo from Telegram; please send it again."
    CAN_APPROVE = True  # asked with inline buttons
    WEBHOOK_RECEIVED = {"ok": True}

    def _set_up(self, sleep: Sleep) -> None:
        settings = self.settings
        api = settings.api_base_url.rstrip("/")
        self._bot = PollingBot(
            settings.token() or "",
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=HTTPXRequest(connect_timeout=10, read_timeout=30, write_timeout=30),
            get_updates_request=HTTPXRequest(
                connect_timeout=10, read_timeout=settings.poll_timeout_s + 15
            ),
        )
        self._outbox = Outbox(self._bot, sleep=sleep)

    # ---- lifecycle ------------------------------------------------------------------------

    async def _connect(self) -> None:
        await self._until_it_works("connect", self._bot.initialize)  # getMe: names mentions

    async def _receive(self) -> None:
        await self._as_leader(self._lead)

    async def _lead(self) -> None:
        """The leader's part (one process of all): register with Telegram, then poll, or hold
        the lead while any process takes the webhook's calls."""
        await self._until_it_works("connect", self._register)
        if self.settings.mode == "polling":
            await self._poll()
        else:
            await asyncio.Event().wait()

    async def _close(self) -> None:
        with contextlib.suppress(TelegramError, RuntimeError):
            await self._bot.shutdown()

    async def _register(self) -> None:
        commands = [BotCommand(name, text) for name, text in DESCRIPTIONS.items()]
        await self._bot.set_my_commands(commands)
        if self.settings.mode == "webhook":
            assert self.settings.webhook_url is not None
            await self._bot.set_webhook(
                self.settings.webhook_url,
                secret_token=self.settings.webhook_secret(),
                allowed_updates=ALLOWED_UPDATES,
            )
        else:  # Telegram answers 409 to getUpdates while a webhook is set
            await self._bot.delete_webhook()

    async def _poll(self) -> None:
        offset: int | None = None
        while True:
            updates = await self._until_it_works(
                "poll", functools.partial(self._updates_from, offset)
            )
            for update in updates:  # kept before the next call's offset confirms them
                await self._keep_received(update)
            ids = [update_id for u in updates if (update_id := update_id_of(u)) is not None]
            if ids:
                offset = max(ids) + 1

    async def _updates_from(self, offset: int | None) -> list[object]:
        return await self._bot.raw_updates(
            offset=offset, wait_s=self.settings.poll_timeout_s, allowed_updates=ALLOWED_UPDATES
        )

    # ---- receiving ------------------------------------------------------------------------

    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        expected = self.settings.webhook_secret() or ""
        offered = call.headers.get("x-telegram-bot-api-secret-token", "")
        if self.settings.mode != "webhook" or not expected:
            return NO_SUCH_BOT
        if not hmac.compare_digest(offered.encode(), expected.encode()):
            return WebhookAnswer(401, error_body("unauthorized", "wrong or missing secret token"))
        return None

    def _platform_id_of(self, payload: object) -> str | None:
        update_id = update_id_of(payload)
        return None if update_id is None else str(update_id)

    def _read(self, payload: dict[str, Any]) -> str:
        read_update(payload, self._bot)
        return str(payload["update_id"])

    async def _message(self, payload: dict[str, Any]) -> Message | UpdateOutcome:
        update = read_update(payload, self._bot)
        if update.callback_query is not None:
            await self._press(update)
            return "answered"
        return "ignored" if update.message is None else update.message

    async def _press(self, update: Update) -> None:
        query = update.callback_query
        assert query is not None
        message = query.message
        sender = query.from_user
        if not isinstance(message, Message) or query.data is None:
            await query.answer()
            return
        if not is_allowed((str(sender.id), sender.username or ""), self.settings.allow_from):
            await query.answer("This bot does not take your answers.")  # as it ignores you
            return
        chat = self._chat(str(message.chat_id), _user_key(query.from_user.id))
        said = await self._commands.press(query.data, chat)
        await query.answer(said)
        shown = f"{message.text}\n\n{said}" if answers_a_question(query.data) else said
        await self._bot.edit_message_text(
            shown, chat_id=message.chat_id, message_id=message.message_id
        )

    # ---- answering ------------------------------------------------------------------------

    def _request(self, message: Message) -> Request:
        return read_message(
            message, self.settings, bot_id=self._bot.id, bot_username=self._bot.username
        )

    def _chat_of(self, message: Message) -> ChatRef:
        sender = message.from_user
        is_private = message.chat.type == "private" and sender is not None
        user_key = _user_key(sender.id) if is_private and sender is not None else None
        return self._chat(str(message.chat_id), user_key)

    def _replies(self, message: Message) -> ChatReplies:
        return ChatReplies(self._outbox, message.chat_id, count_reply=self._count_reply)

    def _envelope(self, message: Message) -> Envelope:
        user = message.from_user
        return Envelope(
            message_id=str(message.message_id),
            sender=None if user is None else Sender(str(user.id), user.full_name),
            is_group=message.chat.type != "private",
        )

    async def _pictures(self, message: Message) -> tuple[ImagePart, ...]:
        if not message.photo:
            return ()
        largest = max(message.photo, key=lambda size: size.width * size.height)
        file = await self._bot.get_file(largest.file_id)
        return (image_part(TELEGRAM_PHOTO_TYPE, bytes(await file.download_as_bytearray())),)


def _user_key(user_id: int) -> str:
    return f"telegram:{user_id}"
