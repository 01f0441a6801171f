"""One tenant's DingTalk robot: its messages arrive over a Stream-mode connection or as signed
HTTP callbacks, are kept in the bot's `Inbox` (by `msgId`) before DingTalk is told we have
them, and are answered once, in order per conversation, after a crash too.

A conversation is a session (`<bot>:<conversationId>`): a private chat keeps its user's memory
(`memory.scope: user`), a group shares the tenant's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from backend.channels.backoff import until_it_works
from backend.channels.base import (
    NO_SUCH_BOT,
    ChannelStatus,
    WebhookAnswer,
    WebhookCall,
    error_body,
    note_failure,
    refused,
)
from backend.channels.commands import Ask, ChatRef, Command, CommandReply, Commands
from backend.channels.context import ChannelServices
from backend.channels.dingtalk.inbound import RobotMessage, message_id_of, parse, read_message
from backend.channels.dingtalk.openapi import DingTalkApi, DingTalkError, Target
from backend.channels.dingtalk.outbound import ConversationReplies
from backend.channels.dingtalk.signature import CallbackSignatures
from backend.channels.dingtalk.stream import StreamConnection
from backend.channels.inbox import Inbox
from backend.channels.leadership import run_as_leader
from backend.channels.platform_body import RefusedUpdate, checked_update, fingerprint, read_body
from backend.channels.turns import ChannelTurns, title_for
from backend.chat.user_input import image_part, image_type
from backend.domain.inbound import InboundMessage, Sender
from backend.domain.messages import ImagePart, UserInput
from backend.metrics.registry import CHANNEL_EVENTS
from backend.settings.channels import DingTalkRobotSettings
from backend.storage.channel_updates import UpdateOutcome

log = logging.getLogger(__name__)

CHANNEL = "dingtalk"
PICTURE_UNAVAILABLE = "I could not fetch that picture from DingTalk; please send it again."


class DingTalkChannel:
    def __init__(
        self,
        *,
        tenant_id: str,
        name: str,
        settings: DingTalkRobotSettings,
        services: ChannelServices,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.tenant_id = tenant_id
        self.name = name
        self.settings = settings
        self.status = ChannelStatus(tenant_id, name, CHANNEL, settings.mode)
        self._sleep = sleep
        self._services = services
        self._api = DingTalkApi(settings, sleep=sleep)
        self._commands = Commands(services)
        self._turns = ChannelTurns(services, kind=CHANNEL, bot=name)
        self._inbox = Inbox(
            status=self.status,
            services=services,
            handle=self._handle,
            platform_errors=(DingTalkError, OSError),
            on_error=self._failed,
        )
        self._signatures = CallbackSignatures(settings.client_secret() or "")
        self._stream = StreamConnection(
            settings,
            status=self.status,
            keep=self._keep,
            refuse=lambda name, reason: self._inbox.refuse(name, {}, reason),
            on_error=self._failed,
            sleep=sleep,
        )
        self._runner: asyncio.Task[None] | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        unanswered = await self._inbox.unanswered()
        self._inbox.open(unanswered)  # replies need no connection: they go over HTTP
        if self.settings.mode == "stream":  # one Stream connection of all processes: the leader's
            lock = ("tally.bot", self.tenant_id, self.name)
            run = run_as_leader(self._services.database, lock, self._lead)
        else:
            run = self._check_credentials()
        self._runner = asyncio.create_task(run, name=f"dingtalk {self.name}")

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        await self._stream.aclose()
        await self._inbox.close()
        self.status.is_connected = False
        await self._api.aclose()

    async def settle(self) -> None:
        """Until every message in hand is answered (tests, and a graceful stop)."""
        await self._inbox.settle()

    async def _lead(self) -> None:
        self.status.is_leader = True
        try:
            await self._stream.run()
        finally:
            self.status.is_leader = False

    async def _check_credentials(self) -> None:
        """Callback mode has no connection of its own: "connected" once DingTalk takes the
        app's credentials (an access token), retried with backoff until it does."""
        await until_it_works(
            self._api.access_token,
            what="connect",
            errors=(DingTalkError,),
            on_error=self._failed,
            sleep=self._sleep,
        )
        self.status.is_connected = True

    # ---- receiving ------------------------------------------------------------------------

    async def _keep(self, data: dict[str, Any]) -> None:
        """A Stream frame's robot message; returning lets the SDK acknowledge it. One that does
        not read is recorded as refused and acknowledged: it would come again and again."""
        payload: dict[str, Any] = {}
        try:
            payload = checked_update(data)
            message = parse(payload)
        except RefusedUpdate as exc:
            name = message_id_of(payload) or fingerprint(repr(data).encode())
            await self._inbox.refuse(name, payload, exc.reason)
            return
        await self._inbox.keep(message.message_id, payload)

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        if self.settings.mode != "callback":
            return NO_SUCH_BOT
        timestamp = call.headers.get("timestamp", "")
        signature = call.headers.get("sign", "")
        problem = self._signatures.problem(timestamp, signature)
        if problem is not None:
            return WebhookAnswer(401, error_body("unauthorized", problem))
        payload: dict[str, Any] = {}
        try:
            payload = read_body(call.body)
            message = parse(payload)
        except RefusedUpdate as exc:
            await self._refuse(payload, call.body, exc.reason)
            return refused(exc.reason)
        first = await self._services.updates.claim_proof(
            tenant_id=self.tenant_id, bot=self.name, proof=signature, platform_id=message.message_id
        )
        if first != message.message_id:  # a redelivery of the same message passes
            return WebhookAnswer(
                401, error_body("unauthorized", "this sign came with another msgId")
            )
        await self._inbox.keep(message.message_id, payload)
        return WebhookAnswer(200, {})

    async def _refuse(self, payload: dict[str, Any], body: bytes, reason: str) -> None:
        await self._inbox.refuse(message_id_of(payload) or fingerprint(body), payload, reason)

    async def _handle(
        self, platform_id: str, payload: dict[str, Any], chunks_sent: int
    ) -> UpdateOutcome:
        message = parse(payload)
        request = read_message(message, self.settings)
        if request is None:
            return "ignored"
        chat = self._chat_ref(message)
        replies = self._replies(message)
        if isinstance(request, Command):
            await self._say(replies, await self._commands.run(request, chat))
            return "answered"
        async with self._inbox.chat_lock(message.conversation_id):
            await self._answer(message, request, chat, replies, platform_id, chunks_sent)
        return "answered"

    async def _answer(
        self,
        message: RobotMessage,
        ask: Ask,
        chat: ChatRef,
        replies: ConversationReplies,
        platform_id: str,
        chunks_sent: int,
    ) -> None:
        try:
            pictures = await self._pictures(message)
        except DingTalkError as exc:  # the text alone would be answered as if it was seen
            log.warning("dingtalk %s: picture not fetched: %s", self.name, exc)
            await self._turns.notice(replies, "photo_unavailable", PICTURE_UNAVAILABLE)
            return
        inbound = InboundMessage(
            tenant_id=self.tenant_id,
            channel=CHANNEL,
            user_input=UserInput(ask.text, pictures),
            external_key=chat.external_key,
            sender=Sender(message.sender_staff_id or message.sender_id, message.sender_nick),
            message_id=message.message_id,
            user_key=chat.user_key,
            title=title_for(ask.text or message.sender_nick),
            is_group=message.is_group,
            is_mentioned=True,  # read_message let only addressed group messages through
            stream=False,
        )
        await self._turns.answer(inbound, replies, platform_id=platform_id, chunks_sent=chunks_sent)

    async def _pictures(self, message: RobotMessage) -> tuple[ImagePart, ...]:
        images = []
        for code in message.pictures:
            raw = await self._api.download(code)
            images.append(image_part(image_type(raw) or "image/jpeg", raw))
        return tuple(images)

    # ---- sending --------------------------------------------------------------------------

    def _replies(self, message: RobotMessage) -> ConversationReplies:
        target = (
            Target(message.conversation_id, is_group=True)
            if message.is_group
            else Target(message.sender_staff_id, is_group=False)
        )
        return ConversationReplies(
            self._api,
            target,
            session_webhook=message.session_webhook,
            webhook_expires_ms=message.session_webhook_expires_ms,
        )

    async def _say(self, replies: ConversationReplies, reply: CommandReply) -> None:
        """A command's reply; its choices as a numbered list (DingTalk has no buttons)."""
        text = reply.text
        if reply.choices:
            listed = "\n".join(f"{n}. {c.label}" for n, c in enumerate(reply.choices, start=1))
            text += f"\n\n{listed}\n\nSend /forget <number>."
        for chunk in replies.chunks(text):
            await replies.send(chunk)
        CHANNEL_EVENTS.labels(self.tenant_id, self.name, "reply").inc()

    def _chat_ref(self, message: RobotMessage) -> ChatRef:
        user_key = None if message.is_group else message.user_key
        return ChatRef(self.tenant_id, CHANNEL, f"{self.name}:{message.conversation_id}", user_key)

    def _failed(self, what: str, error: BaseException) -> None:
        note_failure(self.status, what, error, connection_lost=what == "connect")
