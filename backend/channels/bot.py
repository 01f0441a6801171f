"""The skeleton every chat platform's bot is built on: one tenant's bot, its `Inbox`, its
lifecycle, the dispatch of a kept update to a command or a turn, and the `InboundMessage` a
turn is asked with. A platform supplies the hooks, each a few lines in its `channel.py`.

An update the platform was told we have is never lost: it is kept in the inbox (by the
platform's id for it) before the platform is told, and answered once, after a crash too. One
the bot cannot read (`platform_body.py`, the platform's `inbound.py`) is recorded as refused
and acknowledged all the same, so the platform stops delivering it again. Messages of one chat
are answered in order; commands do not wait behind a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from backend.channels.backoff import Sleep, until_it_works
from backend.channels.base import (
    NO_SUCH_BOT,
    ChannelStatus,
    WebhookAnswer,
    WebhookCall,
    note_failure,
    refused,
)
from backend.channels.commands import Ask, ChatRef, Command, CommandReply, Commands, Request
from backend.channels.context import ChannelServices
from backend.channels.inbox import Inbox
from backend.channels.leadership import run_as_leader
from backend.channels.platform_body import RefusedUpdate, checked_update, fingerprint, read_body
from backend.channels.turns import ChannelTurns, Replies, title_for
from backend.domain.inbound import InboundMessage, Sender
from backend.domain.messages import ImagePart, UserInput
from backend.metrics.registry import CHANNEL_EVENTS
from backend.storage.channel_updates import ChannelUpdate, UpdateOutcome

log = logging.getLogger(__name__)

T = TypeVar("T")


class BotSettings(Protocol):
    @property
    def mode(self) -> str: ...


Settings = TypeVar("Settings", bound=BotSettings)
Message = TypeVar("Message")  # one platform message, as the platform's inbound reads it
Chunk = TypeVar("Chunk")  # one message as the platform sends it


class ChatReplies(Replies[Chunk], Protocol):
    """One chat of a platform, as its outbound sends to it: a turn's replies, and a command's."""

    async def say(self, reply: CommandReply) -> None:
        """A command's reply, its choices as the platform can show them (buttons, a list)."""
        ...


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a platform says of a message beside its words."""

    message_id: str  # the platform's: the turn's idempotency key
    sender: Sender | None
    is_group: bool


class PlatformBot(ABC, Generic[Settings, Message, Chunk]):
    """One tenant's bot on one platform (a `Channel`); subclasses are the platform's hooks."""

    KIND: ClassVar[str]  # the registry's name for the platform, and `InboundMessage.channel`
    # Failures of the platform (not bugs): noted in the status, the update marked failed.
    PLATFORM_ERRORS: ClassVar[tuple[type[BaseException], ...]]
    CONNECTION_STEPS: ClassVar[tuple[str, ...]] = ("connect",)  # failing, the bot is deaf
    PICTURE_ERRORS: ClassVar[tuple[type[BaseException], ...]]  # a picture could not be fetched
    PICTURE_UNAVAILABLE: ClassVar[str]  # what the chat is told then
    # Whether replies need no connection (they go over HTTP): the inbox then opens at start,
    # else once `_connect` has connected.
    ANSWERS_UNCONNECTED: ClassVar[bool] = False
    CAN_APPROVE: ClassVar[bool] = False  # whether its chats answer questions with buttons
    WEBHOOK_RECEIVED: ClassVar[dict[str, object]] = {}  # the body that tells it "received"

    def __init__(
        self,
        *,
        tenant_id: str,
        name: str,
        settings: Settings,
        services: ChannelServices,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.tenant_id = tenant_id
        self.name = name
        self.settings = settings
        self.status = ChannelStatus(tenant_id, name, self.KIND, settings.mode)
        self._sleep = sleep
        self._services = services
        self._commands = Commands(services)
        self._turns = ChannelTurns(services, kind=self.KIND, bot=name)
        self._inbox = Inbox(
            status=self.status,
            services=services,
            handle=self._handle,
            platform_errors=self.PLATFORM_ERRORS,
            on_error=self._failed,
        )
        self._runner: asyncio.Task[None] | None = None
        self._set_up(sleep)

    # ---- hooks ----------------------------------------------------------------------------

    @abstractmethod
    def _set_up(self, sleep: Sleep) -> None:
        """Make the platform's clients (no connection yet), once `settings` and `status` are set."""

    async def _connect(self) -> None:
        """Before the inbox opens: what answering needs (unless `ANSWERS_UNCONNECTED`)."""

    @abstractmethod
    async def _receive(self) -> None:
        """Receive until cancelled: poll or hold a connection (as the leader), or check the
        credentials where the platform calls the webhook."""

    async def _stop_receiving(self) -> None:
        """At stop, before the inbox closes: drop what the connection holds."""

    async def _close(self) -> None:
        """At stop, after the inbox closed: close the platform's client."""

    @abstractmethod
    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        """The refusal of a webhook call that is not the platform's (None: it is)."""

    async def _admit(self, call: WebhookCall, platform_id: str) -> WebhookAnswer | None:
        """The refusal of an authentic call that may not be kept (a replay), once it is read."""
        return None

    @abstractmethod
    def _platform_id_of(self, payload: object) -> str | None:
        """The update's id, when it has a readable one (a refused update is recorded under it)."""

    @abstractmethod
    def _read(self, payload: dict[str, Any]) -> str:
        """The id of the update `payload` is, once it reads; else RefusedUpdate."""

    @abstractmethod
    async def _message(self, payload: dict[str, Any]) -> Message | UpdateOutcome:
        """The message a kept update carries; or, for one that carries none to answer, what
        became of it (a button pressed is answered here)."""

    @abstractmethod
    def _request(self, message: Message) -> Request:
        """What `message` asks, under the bot's `allow_from` and `group_policy`."""

    @abstractmethod
    def _chat_of(self, message: Message) -> ChatRef:
        """The chat service's name for `message`'s chat (`_chat` builds it)."""

    @abstractmethod
    def _replies(self, message: Message) -> ChatReplies[Chunk]:
        """How the chat `message` came from receives what the bot says."""

    @abstractmethod
    def _envelope(self, message: Message) -> Envelope: ...

    @abstractmethod
    async def _pictures(self, message: Message) -> tuple[ImagePart, ...]:
        """Its pictures, fetched; `PICTURE_ERRORS` when the platform would not give them."""

    def _title(self, message: Message, ask: Ask) -> str:
        """A new session's title."""
        return title_for(ask.text)

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        unanswered = await self._inbox.unanswered()
        if self.ANSWERS_UNCONNECTED:
            self._inbox.open(unanswered)
        self._runner = asyncio.create_task(self._run(unanswered), name=f"{self.KIND} {self.name}")

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        await self._stop_receiving()
        await self._inbox.close()
        self.status.is_connected = False
        await self._close()

    async def settle(self) -> None:
        """Until every update in hand is answered (tests, and a graceful stop)."""
        await self._inbox.settle()

    async def _run(self, unanswered: list[ChannelUpdate]) -> None:
        if not self.ANSWERS_UNCONNECTED:
            await self._connect()
            self._inbox.open(unanswered)  # updates delivered meanwhile wait for it
        await self._receive()

    async def _as_leader(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """`lead()` while this process is the one of all that runs the bot's receiving side."""

        async def leading() -> None:
            self.status.is_leader = True
            try:
                await lead()
            finally:
                self.status.is_leader = False

        lock = ("tally.bot", self.tenant_id, self.name)
        await run_as_leader(self._services.database, lock, leading)

    async def _until_it_works(
        self,
        what: str,
        call: Callable[[], Awaitable[T]],
        errors: tuple[type[BaseException], ...] | None = None,
    ) -> T:
        """`call`, retried with backoff while the platform cannot be reached (noted in the
        status); the bot is connected once it works."""
        result = await until_it_works(
            call,
            what=what,
            errors=self.PLATFORM_ERRORS if errors is None else errors,
            on_error=self._failed,
            sleep=self._sleep,
        )
        self.status.is_connected = True
        return result

    def _failed(self, what: str, error: BaseException) -> None:
        note_failure(self.status, what, error, connection_lost=what in self.CONNECTION_STEPS)

    # ---- receiving ------------------------------------------------------------------------

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        refusal = self._authenticate(call)
        if refusal is not None:
            return refusal
        payload: dict[str, Any] = {}
        try:
            payload = read_body(call.body)
            platform_id = self._read(payload)
        except RefusedUpdate as exc:
            name = self._platform_id_of(payload) or fingerprint(call.body)
            await self._inbox.refuse(name, payload, exc.reason)
            return refused(exc.reason)
        refusal = await self._admit(call, platform_id)
        if refusal is not None:
            return refusal
        await self._inbox.keep(platform_id, payload)
        return WebhookAnswer(200, dict(self.WEBHOOK_RECEIVED))

    async def verify_webhook(self, call: WebhookCall) -> WebhookAnswer:
        """A `GET` of the webhook's address: only WeCom's URL verification uses one."""
        return NO_SUCH_BOT

    async def _keep_received(self, raw: object) -> None:
        """An update polled or received on a connection, read as a webhook's is; returning
        acknowledges it. One that does not read is recorded as refused and acknowledged: it
        would come again and again."""
        payload: dict[str, Any] = {}
        try:
            payload = checked_update(raw)
            platform_id = self._read(payload)
        except RefusedUpdate as exc:
            name = self._platform_id_of(payload or raw) or fingerprint(repr(raw).encode())
            await self._inbox.refuse(name, payload, exc.reason)
            return
        await self._inbox.keep(platform_id, payload)

    # ---- answering ------------------------------------------------------------------------

    async def _handle(
        self, platform_id: str, payload: dict[str, Any], chunks_sent: int
    ) -> UpdateOutcome:
        message = await self._message(payload)
        if isinstance(message, str):
            return message  # type: ignore[return-value]  # an UpdateOutcome: platform messages are no str
        request = self._request(message)
        if request is None:
            return "ignored"
        chat = self._chat_of(message)
        replies = self._replies(message)
        if isinstance(request, Command):
            await self._say(replies, await self._commands.run(request, chat))
            return "answered"
        async with self._inbox.chat_lock(chat.external_key):
            await self._answer(message, request, chat, replies, platform_id, chunks_sent)
        return "answered"

    async def _answer(
        self,
        message: Message,
        ask: Ask,
        chat: ChatRef,
        replies: ChatReplies[Chunk],
        platform_id: str,
        chunks_sent: int,
    ) -> None:
        try:
            pictures = await self._pictures(message)
        except self.PICTURE_ERRORS as exc:  # the text alone would be answered as if it was seen
            log.warning("%s %s: picture not fetched: %s", self.KIND, self.name, exc)
            await self._turns.notice(replies, "photo_unavailable", self.PICTURE_UNAVAILABLE)
            return
        envelope = self._envelope(message)
        inbound = InboundMessage(
            tenant_id=self.tenant_id,
            channel=self.KIND,
            user_input=UserInput(ask.text, pictures),
            external_key=chat.external_key,
            sender=envelope.sender,
            message_id=envelope.message_id,
            user_key=chat.user_key,
            title=self._title(message, ask),
            is_group=envelope.is_group,
            is_mentioned=True,  # `_request` let only addressed group messages through
            stream=False,
            can_approve=self.CAN_APPROVE,
        )
        await self._turns.answer(inbound, replies, platform_id=platform_id, chunks_sent=chunks_sent)

    async def _say(self, replies: ChatReplies[Chunk], reply: CommandReply) -> None:
        await replies.say(reply)
        self._count_reply()

    def _count_reply(self) -> None:
        CHANNEL_EVENTS.labels(self.tenant_id, self.name, "reply").inc()

    def _chat(self, chat_id: str, user_key: str | None) -> ChatRef:
        """A chat of this bot: its sessions are keyed `<bot>:<chat id>`."""
        return ChatRef(self.tenant_id, self.KIND, f"{self.name}:{chat_id}", user_key)
