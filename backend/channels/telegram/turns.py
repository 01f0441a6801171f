"""A Telegram message that asks for a turn: its text and photos as the user's input, the turn
through the chat service (the message id is its idempotency key), "typing…" while the model
works, and the reply sent in chunks, counting them so a restart sends only the rest."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from telegram import Message
from telegram.error import TelegramError

from backend.channels.commands import ChatRef
from backend.channels.context import ChannelServices
from backend.channels.telegram.format import telegram_chunks
from backend.channels.telegram.inbound import Ask
from backend.channels.telegram.outbound import Outbox
from backend.chat.user_input import image_part
from backend.domain.events import TurnCompleted
from backend.domain.inbound import InboundMessage, Sender
from backend.domain.messages import ImagePart, UserInput
from backend.errors import TallyError
from backend.metrics import CHANNEL_EVENTS

if TYPE_CHECKING:
    from backend.channels.telegram.channel import TelegramChannel

log = logging.getLogger(__name__)

TITLE_CHARS = 60
TELEGRAM_PHOTO_TYPE = "image/jpeg"  # Telegram re-encodes every photo it delivers as JPEG
PHOTO_UNAVAILABLE = "I could not fetch that photo from Telegram; please send it again."
SAID_AS_IS = ("rate_limited", "token_quota_exceeded", "message_too_long", "photo_unavailable")


class TelegramTurns:
    def __init__(self, channel: TelegramChannel, services: ChannelServices, outbox: Outbox):
        self._channel = channel
        self._services = services
        self._outbox = outbox

    async def answer(
        self, message: Message, ask: Ask, chat: ChatRef, platform_id: str, chunks_sent: int
    ) -> None:
        try:
            photos = await self._photos(message)
        except TelegramError as exc:  # the text alone would be answered as if the photo was seen
            log.warning("telegram %s: photo not fetched: %s", self._channel.name, exc)
            await self._notice(message.chat_id, "photo_unavailable", PHOTO_UNAVAILABLE)
            return
        inbound = InboundMessage(
            tenant_id=chat.tenant_id,
            channel=chat.channel,
            user_input=UserInput(ask.text, photos),
            external_key=chat.external_key,
            sender=_sender(message),
            message_id=str(message.message_id),
            user_key=chat.user_key,
            title=ask.text.split("\n", 1)[0][:TITLE_CHARS],
            is_group=message.chat.type != "private",
            is_mentioned=True,  # read_message let only addressed group messages through
            stream=False,
        )
        try:
            handle = await self._services.chat.start(inbound)
            async with self._outbox.typing(message.chat_id):
                end = await handle.result()
        except TallyError as exc:  # refused before the turn: too long, the request limit
            await self._notice(message.chat_id, exc.code, exc.message)
            return
        if not isinstance(end, TurnCompleted):
            await self._notice(message.chat_id, end.code, end.message)
            return
        self._services.failpoints.hit("telegram.before_reply")  # stored, not yet sent
        await self._outbox.send_chunks(
            message.chat_id,
            telegram_chunks(end.reply),
            first=chunks_sent,
            sent=functools.partial(self._count_sent, chat, platform_id),
        )
        CHANNEL_EVENTS.labels(chat.tenant_id, self._channel.name, "reply").inc()

    async def _count_sent(self, chat: ChatRef, platform_id: str, count: int) -> None:
        """Kept after each chunk, so a restart sends only the chunks not yet sent."""
        await self._services.updates.count_sent(
            tenant_id=chat.tenant_id, bot=self._channel.name, platform_id=platform_id, chunks=count
        )
        self._services.failpoints.hit("telegram.chunk_sent")

    async def _photos(self, message: Message) -> tuple[ImagePart, ...]:
        if not message.photo:
            return ()
        largest = max(message.photo, key=lambda size: size.width * size.height)
        file = await self._channel.bot.get_file(largest.file_id)
        return (image_part(TELEGRAM_PHOTO_TYPE, bytes(await file.download_as_bytearray())),)

    async def _notice(self, chat_id: int, code: str, message: str) -> None:
        """A turn that did not answer says so in the chat; it is never stored as a reply."""
        log.info("telegram %s: turn not answered (%s)", self._channel.name, code)
        text = f"Sorry, I could not answer that ({code})."
        if code in SAID_AS_IS:
            text = f"{message} ({code})"
        elif code == "cancelled":
            text = "Stopped."
        await self._outbox.send_chunks(chat_id, telegram_chunks(text))


def _sender(message: Message) -> Sender | None:
    user = message.from_user
    return None if user is None else Sender(str(user.id), user.full_name)
