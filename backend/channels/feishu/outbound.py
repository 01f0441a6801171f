"""Sending to a Feishu chat: each reply in answer to the message it answers (the OpenAPI's
`im/v1/messages/{id}/reply`, shown with it in its thread), as rich text in order and within
the limit; a command's choices, and a question's, as buttons on an interactive card that only
the person it was shown for can press."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from backend.channels.commands import CommandReply
from backend.channels.feishu.format import card_content, feishu_chunks, post_content
from backend.channels.feishu.openapi import FeishuApi


class ThreadReplies:
    """One Feishu message's thread as the bot's `ChatReplies` (no "typing…" sign on Feishu)."""

    def __init__(
        self,
        api: FeishuApi,
        message_id: str,
        *,
        owner: str,
        chat_id: str,
        is_private: bool,
        count_reply: Callable[[], None],
    ) -> None:
        self._api = api
        self._message_id = message_id
        self._button_value = {"owner": owner, "chat": chat_id, "private": is_private}
        self._count_reply = count_reply

    def chunks(self, text: str) -> Sequence[str]:
        return feishu_chunks(text)

    async def send(self, chunk: str) -> None:
        await self._api.reply(self._message_id, "post", post_content(chunk))

    def working(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def ask(self, question: CommandReply) -> None:
        await self.say(question)  # its choices as buttons
        self._count_reply()

    async def say(self, reply: CommandReply) -> None:
        """`reply` in chunks; its choices as a card's buttons under the last."""
        chunks = self.chunks(reply.text)
        for chunk in chunks[:-1] if reply.choices else chunks:
            await self.send(chunk)
        if reply.choices:
            card = card_content(chunks[-1] if chunks else "", reply.choices, self._button_value)
            await self._api.reply(self._message_id, "interactive", card)
