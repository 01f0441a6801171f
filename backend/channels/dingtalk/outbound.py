"""Sending to a DingTalk conversation: Markdown messages within the platform's limit, through
the message's session webhook while it is valid and on a DingTalk host, else (or once DingTalk
says it expired) through the OpenAPI send with the robot's access token."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from backend.channels.chunking import Block, pack, pieces
from backend.channels.commands import CommandReply
from backend.channels.dingtalk.openapi import DingTalkApi, DingTalkError, Target

log = logging.getLogger(__name__)

# DingTalk refuses Markdown over 5,000 characters; a margin for the title it shows beside it.
MAX_CHARS = 4_000
TITLE_CHARS = 40
WEBHOOK_MARGIN_MS = 60_000  # a session webhook this close to expiry is not trusted to work


def dingtalk_chunks(markdown: str, *, limit: int = MAX_CHARS) -> list[str]:
    """`markdown` as ordered messages of at most `limit` characters each."""

    def fits(blocks: list[Block]) -> bool:
        return len(_joined(blocks)) <= limit

    blocks = pieces(markdown, lambda block: fits([block]))
    return [_joined(group) for group in pack(blocks, fits)]


def _joined(blocks: list[Block]) -> str:
    return "\n\n".join(block.markdown() for block in blocks)


def title_of(text: str) -> str:
    """What DingTalk shows of a message in notifications: its first words, without markup."""
    first = text.strip().split("\n", 1)[0].lstrip("#>*-` ").strip()
    return first[:TITLE_CHARS] or "Reply"


class ConversationReplies:
    """One DingTalk conversation as `Replies` (DingTalk has no "typing…" sign)."""

    def __init__(
        self,
        api: DingTalkApi,
        target: Target,
        *,
        session_webhook: str = "",
        webhook_expires_ms: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = api
        self._target = target
        self._webhook = session_webhook
        self._webhook_expires_ms = webhook_expires_ms
        self._clock = clock

    def chunks(self, text: str) -> Sequence[str]:
        return dingtalk_chunks(text)

    async def send(self, chunk: str) -> None:
        title = title_of(chunk)
        if self._webhook_usable():
            try:
                await self._api.post_session_webhook(self._webhook, title, chunk)
                return
            except DingTalkError as exc:
                # Rate limited even after waiting (the OpenAPI will be too), or no answer: it
                # may have arrived, and sending it again the other way would say it twice.
                if exc.retry or not (exc.code or exc.status):
                    raise
                log.info("dingtalk: session webhook refused (%s); sending by the OpenAPI", exc)
                self._webhook = ""  # expired or gone: the rest of the reply goes the other way
        await self._api.send_markdown(self._target, title, chunk)

    def working(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def ask(self, question: CommandReply) -> None:
        # Never asked (its messages cannot approve: a robot's Markdown has no buttons that
        # call back); said as text all the same, should that change.
        for chunk in self.chunks(question.text):
            await self.send(chunk)

    def _webhook_usable(self) -> bool:
        if not self._webhook or not self._api.is_own_host(self._webhook):
            return False
        return self._clock() * 1000 < self._webhook_expires_ms - WEBHOOK_MARGIN_MS
