"""Sending to a DingTalk conversation: Markdown messages within the platform's limit, through
the message's session webhook while it is valid and on a DingTalk host, else (or once DingTalk
says it expired) through the OpenAPI send with the robot's access token."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from backend.channels.commands import CommandReply
from backend.channels.dingtalk.format import dingtalk_chunks, title_of
from backend.channels.dingtalk.openapi import DingTalkApi, DingTalkError, Target

log = logging.getLogger(__name__)

WEBHOOK_MARGIN_MS = 60_000  # a session webhook this close to expiry is not trusted to work


class ConversationReplies:
    """One DingTalk conversation as the bot's `ChatReplies` (DingTalk has no "typing…" sign)."""

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

    async def say(self, reply: CommandReply) -> None:
        """A command's reply; its choices as a numbered list (DingTalk has no buttons)."""
        text = reply.text
        if reply.choices:
            listed = "\n".join(f"{n}. {c.label}" for n, c in enumerate(reply.choices, start=1))
            text += f"\n\n{listed}\n\nSend /forget <number>."
        for chunk in self.chunks(text):
            await self.send(chunk)

    def _webhook_usable(self) -> bool:
        if not self._webhook or not self._api.is_own_host(self._webhook):
            return False
        return self._clock() * 1000 < self._webhook_expires_ms - WEBHOOK_MARGIN_MS
