"""Sending to a Telegram chat: a reply as ordered chunks in Telegram's HTML, re-sent as plain
text when Telegram refuses the markup, waiting out flood limits (`retry_after`), a typing
indicator while the model works, and a command's choices as inline buttons."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from backend.channels.commands import CommandReply
from backend.channels.telegram.format import Chunk, telegram_chunks

log = logging.getLogger(__name__)

TYPING_EVERY_S = 4.0  # Telegram shows "typing…" for about five seconds per action
MAX_FLOOD_WAITS = 5
MAX_FLOOD_WAIT_S = 120.0

Sleep = Callable[[float], Awaitable[None]]


class Outbox:
    """One bot's way out to its chats."""

    def __init__(self, bot: Bot, *, sleep: Sleep = asyncio.sleep) -> None:
        self._bot = bot
        self._sleep = sleep

    async def send_chunk(self, chat_id: int, chunk: Chunk, **options: Any) -> None:
        try:
            await self._call(
                self._bot.send_message, chat_id, chunk.html, parse_mode=ParseMode.HTML, **options
            )
        except BadRequest as exc:
            if "parse" not in str(exc).casefold() and "tag" not in str(exc).casefold():
                raise
            # Telegram refused the markup: the same words, as plain text.
            await self._call(self._bot.send_message, chat_id, chunk.plain, **options)

    async def send_reply(self, chat_id: int, reply: CommandReply) -> None:
        """`reply` in chunks, its choices as inline buttons under the last."""
        markup = None
        if reply.choices:
            rows = [[InlineKeyboardButton(c.label, callback_data=c.data)] for c in reply.choices]
            markup = InlineKeyboardMarkup(rows)
        chunks = telegram_chunks(reply.text)
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            await self.send_chunk(chat_id, chunk, reply_markup=markup if last else None)

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: int) -> AsyncIterator[None]:
        """Show "typing…" in the chat until the block ends; a failure to show it is no reason
        to fail the reply."""

        async def keep_typing() -> None:
            while True:
                with contextlib.suppress(TelegramError):
                    await self._bot.send_chat_action(chat_id, ChatAction.TYPING)
                await asyncio.sleep(TYPING_EVERY_S)

        task = asyncio.create_task(keep_typing())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _call(self, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """`method`, waiting as long as Telegram's flood control asks (a few times at most)."""
        for attempt in range(MAX_FLOOD_WAITS + 1):
            try:
                return await method(*args, **kwargs)
            except RetryAfter as exc:
                wait = _seconds(exc)
                if attempt == MAX_FLOOD_WAITS or wait > MAX_FLOOD_WAIT_S:
                    raise
                log.info("telegram flood control: waiting %.0f s", wait)
                await self._sleep(wait)
        raise AssertionError("unreachable")


class ChatReplies:
    """One Telegram chat as the bot's `ChatReplies`: HTML chunks, "typing…" while the model
    works, questions and commands' choices as inline buttons."""

    def __init__(self, outbox: Outbox, chat_id: int, *, count_reply: Callable[[], None]) -> None:
        self._outbox = outbox
        self._chat_id = chat_id
        self._count_reply = count_reply

    def chunks(self, text: str) -> Sequence[Chunk]:
        return telegram_chunks(text)

    async def send(self, chunk: Chunk) -> None:
        await self._outbox.send_chunk(self._chat_id, chunk)

    def working(self) -> AbstractAsyncContextManager[None]:
        return self._outbox.typing(self._chat_id)

    async def ask(self, question: CommandReply) -> None:
        await self.say(question)  # its choices as inline buttons
        self._count_reply()

    async def say(self, reply: CommandReply) -> None:
        await self._outbox.send_reply(self._chat_id, reply)


def _seconds(error: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns that the int becomes a timedelta in 23
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
