"""A chat message that asks for a turn, on any platform: the turn through the chat service (the
platform's message id is its idempotency key, so a message delivered again is not asked twice),
the platform's "working…" sign while the model works, and the reply sent in chunks, counted as
they go so a restart sends only the rest. A turn that did not answer says so in the chat."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Generic, Protocol, TypeVar

from backend.channels.commands import CommandReply, approval_question, remember_question
from backend.channels.context import ChannelServices
from backend.chat.turn_handle import TurnHandle
from backend.domain.events import ToolApprovalRequested, TurnCompleted, TurnFailed
from backend.domain.inbound import InboundMessage
from backend.errors import TallyError
from backend.metrics.registry import CHANNEL_EVENTS

log = logging.getLogger(__name__)

Chunk = TypeVar("Chunk")  # one message as the platform sends it

TITLE_CHARS = 60  # of a new session's title: the first line of its first message

# Refusals whose own words tell the user what to do; any other is named by its code.
SAID_AS_IS = ("rate_limited", "token_quota_exceeded", "message_too_long", "photo_unavailable")


def title_for(text: str) -> str:
    return text.split("\n", 1)[0][:TITLE_CHARS]


class Replies(Protocol, Generic[Chunk]):
    """How one chat of a platform receives what the bot says."""

    def chunks(self, text: str) -> Sequence[Chunk]:
        """`text` (Markdown) as the platform's messages, in order, each within its limit."""
        ...

    async def send(self, chunk: Chunk) -> None: ...

    def working(self) -> AbstractAsyncContextManager[None]:
        """Shown while the model works ("typing…"), where the platform has such a sign."""
        ...

    async def ask(self, question: CommandReply) -> None:
        """Show a question whose choices come back as presses (buttons). Asked only of chats
        whose messages say they can answer (`InboundMessage.can_approve`)."""
        ...


class ChannelTurns:
    def __init__(self, services: ChannelServices, *, kind: str, bot: str) -> None:
        self._services = services
        self._kind = kind
        self._bot = bot

    async def answer(
        self,
        inbound: InboundMessage,
        replies: Replies[Chunk],
        *,
        platform_id: str,
        chunks_sent: int,
    ) -> None:
        try:
            handle = await self._services.chat.start(inbound)
            async with replies.working():
                end = await self._until_the_end(handle, replies)
        except TallyError as exc:  # refused before the turn: too long, the request limit
            await self.notice(replies, exc.code, exc.message)
            return
        if not isinstance(end, TurnCompleted):
            await self.notice(replies, end.code, end.message)
            return
        self._services.failpoints.hit(f"{self._kind}.before_reply")  # stored, not yet sent
        chunks = replies.chunks(end.reply)
        for index in range(chunks_sent, len(chunks)):
            await replies.send(chunks[index])
            await self._services.updates.count_sent(  # kept after each chunk
                tenant_id=inbound.tenant_id,
                bot=self._bot,
                platform_id=platform_id,
                chunks=index + 1,
            )
            self._services.failpoints.hit(f"{self._kind}.chunk_sent")
        CHANNEL_EVENTS.labels(inbound.tenant_id, self._bot, "reply").inc()
        log.info(
            "%s %s: reply out",
            self._kind,
            self._bot,
            extra={
                "tenant": inbound.tenant_id,
                "bot": self._bot,
                "update": platform_id,
                "session": end.session_id,
                "chunks": len(chunks),
            },
        )
        await self._ask_to_remember(inbound, replies)

    async def _ask_to_remember(self, inbound: InboundMessage, replies: Replies[Chunk]) -> None:
        """Lines proposed about the person since they were last asked, each asked once (a
        summary's line is proposed after the reply that overflowed the window: it is asked
        after the next one, or seen with /memory)."""
        if inbound.user_key is None:
            return
        runtime = await self._services.runtimes.get(inbound.tenant_id)
        if not runtime.settings.memory.confirm_writes:
            return
        for proposal in await self._services.proposals.to_ask(
            tenant_id=inbound.tenant_id, user_key=inbound.user_key
        ):
            await replies.ask(remember_question(proposal, has_buttons=inbound.can_approve))

    async def _until_the_end(
        self, handle: TurnHandle, replies: Replies[Chunk]
    ) -> TurnCompleted | TurnFailed:
        """The turn's final event; a tool call waiting for approval is asked in the chat."""
        async for event in handle.events():
            if isinstance(event, TurnCompleted | TurnFailed):
                return event
            if isinstance(event, ToolApprovalRequested):  # only where the chat can answer
                await replies.ask(approval_question(handle.turn_id, event))
        raise AssertionError("a turn always ends with TurnCompleted or TurnFailed")

    async def notice(self, replies: Replies[Chunk], code: str, message: str) -> None:
        """A turn that did not answer says so; it is never stored as a reply."""
        log.info("%s %s: reply out: turn not answered (%s)", self._kind, self._bot, code)
        text = f"Sorry, I could not answer that ({code})."
        if code in SAID_AS_IS:
            text = f"{message} ({code})"
        elif code == "cancelled":
            text = "Stopped."
        for chunk in replies.chunks(text):
            await replies.send(chunk)
