"""A Telegram message that asks for a turn: its text and photos as the user's input, handed to
the channels' turn (`channels/turns.py`) with this chat's way of receiving the reply: HTML
chunks, and "typing…" while the model works."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from telegram import Message
from telegram.error import TelegramError

from backend.channels.commands import Ask, ChatRef, CommandReply
from backend.channels.telegram.format import Chunk, telegram_chunks
from backend.channels.telegram.outbound import Outbox
from backend.channels.turns import ChannelTurns, title_for
from backend.chat.user_input import image_part
from backend.domain.inbound import InboundMessage, Sender
from backend.domain.messages import ImagePart, UserInput

if TYPE_CHECKING:
    from backend.channels.telegram.channel import TelegramChannel

log = logging.getLogger(__name__)

TELEGRAM_PHOTO_TYPE = "image/jpeg"  # Telegram re-encodes every photo it delivers as JPEG
PHOTO_UNAVAILABLE = "I could not fetch that photo from Telegram; please send it again."


class ChatReplies:
    """One Telegram chat as `Replies`."""

    def __init__(self, channel: TelegramChannel, outbox: Outbox, chat_id: int) -> None:
        self._channel = channel
        self._outbox = outbox
        self._chat_id = chat_id

    def chunks(self, text: str) -> Sequence[Chunk]:
        return telegram_chunks(text)

    async def send(self, chunk: Chunk) -> None:
        await self._outbox.send_chunk(self._chat_id, chunk)

    def working(self) -> AbstractAsyncContextManager[None]:
        return self._outbox.typing(self._chat_id)

    async def ask(self, question: CommandReply) -> None:
        await self._channel.reply(self._chat_id, question)  # its choices as inline buttons


class TelegramTurns:
    def __init__(self, channel: TelegramChannel, turns: ChannelTurns, outbox: Outbox):
        self._channel = channel
        self._turns = turns
        self._outbox = outbox

    async def answer(
        self, message: Message, ask: Ask, chat: ChatRef, platform_id: str, chunks_sent: int
    ) -> None:
        replies = ChatReplies(self._channel, self._outbox, message.chat_id)
        try:
            photos = await self._photos(message)
        except TelegramError as exc:  # the text alone would be answered as if the photo was seen
            log.warning("telegram %s: photo not fetched: %s", self._channel.name, exc)
            await self._turns.notice(replies, "photo_unavailable", PHOTO_UNAVAILABLE)
            return
        inbound = InboundMessage(
            tenant_id=chat.tenant_id,
            channel=chat.channel,
            user_input=UserInput(ask.text, photos),
            external_key=chat.external_key,
            sender=_sender(message),
            message_id=str(message.message_id),
            user_key=chat.user_key,
            title=title_for(ask.text),
            is_group=message.chat.type != "private",
            is_mentioned=True,  # read_message let only addressed group messages through
            stream=False,
            can_approve=True,  # asked with inline buttons
        )
        await self._turns.answer(inbound, replies, platform_id=platform_id, chunks_sent=chunks_sent)

    async def _photos(self, message: Message) -> tuple[ImagePart, ...]:
        if not message.photo:
            return ()
        largest = max(message.photo, key=lambda size: size.width * size.height)
        file = await self._channel.bot.get_file(largest.file_id)
        return (image_part(TELEGRAM_PHOTO_TYPE, bytes(await file.download_as_bytearray())),)


def _sender(message: Message) -> Sender | None:
    user = message.from_user
    return None if user is None else Sender(str(user.id), user.full_name)
