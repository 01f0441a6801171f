"""One tenant's DingTalk robot: the hooks over the bot skeleton (`channels/bot.py`). Its
messages arrive over a Stream-mode connection or as signed HTTP callbacks, and are kept (by
`msgId`) before DingTalk is told we have them.

A conversation is a session (`<bot>:<conversationId>`): a private chat keeps its user's memory
(`memory.scope: user`), a group shares the tenant's.
"""

from __future__ import annotations

from typing import Any

from backend.channels.backoff import Sleep
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall, error_body
from backend.channels.bot import Envelope, PlatformBot
from backend.channels.commands import Ask, ChatRef, Request
from backend.channels.dingtalk.inbound import RobotMessage, message_id_of, parse, read_message
from backend.channels.dingtalk.openapi import DingTalkApi, DingTalkError, Target
from backend.channels.dingtalk.outbound import ConversationReplies
from backend.channels.dingtalk.signature import CallbackSignatures
from backend.channels.dingtalk.stream import StreamConnection
from backend.channels.turns import title_for
from backend.chat.user_input import image_part, image_type
from backend.domain.inbound import Sender
from backend.domain.messages import ImagePart
from backend.settings.channels import DingTalkRobotSettings
from backend.storage.channel_updates import UpdateOutcome


class DingTalkChannel(PlatformBot[DingTalkRobotSettings, RobotMessage, str]):
    KIND = "dingtalk"
    PLATFORM_ERRORS = (DingTalkError, OSError)
    PICTURE_ERRORS = (DingTalkError,)
    PICTURE_UNAVAILABLE = "I could not fetch that picture from DingTalk; please send it again."
    ANSWERS_UNCONNECTED = True  # replies go over HTTP

    def _set_up(self, sleep: Sleep) -> None:
        settings = self.settings
        self._api = DingTalkApi(settings, sleep=sleep)
        self._signatures = CallbackSignatures(settings.client_secret() or "")
        self._stream = StreamConnection(
            settings,
            status=self.status,
            keep=self._keep_received,
            refuse=lambda name, reason: self._inbox.refuse(name, {}, reason),
            on_error=self._failed,
            sleep=sleep,
        )

    # ---- lifecycle ------------------------------------------------------------------------

    async def _receive(self) -> None:
        if self.settings.mode == "stream":  # one Stream connection of all processes: the leader's
            await self._as_leader(self._stream.run)
        else:
            await self._check_credentials()

    async def _check_credentials(self) -> None:
        """Callback mode has no connection of its own: "connected" once DingTalk takes the
        app's credentials (an access token), retried with backoff until it does."""
        await self._until_it_works("connect", self._api.access_token, errors=(DingTalkError,))

    async def _stop_receiving(self) -> None:
        await self._stream.aclose()

    async def _close(self) -> None:
        await self._api.aclose()

    # ---- receiving ------------------------------------------------------------------------

    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        if self.settings.mode != "callback":
            return NO_SUCH_BOT
        timestamp = call.headers.get("timestamp", "")
        problem = self._signatures.problem(timestamp, call.headers.get("sign", ""))
        if problem is not None:
            return WebhookAnswer(401, error_body("unauthorized", problem))
        return None

    async def _admit(self, call: WebhookCall, platform_id: str) -> WebhookAnswer | None:
        """A signature covers the time, not the body: one that came with another message is a
        replay (a redelivery of the same message passes)."""
        first = await self._services.updates.claim_proof(
            tenant_id=self.tenant_id,
            bot=self.name,
            proof=call.headers.get("sign", ""),
            platform_id=platform_id,
        )
        if first != platform_id:
            return WebhookAnswer(
                401, error_body("unauthorized", "this sign came with another msgId")
            )
        return None

    def _platform_id_of(self, payload: object) -> str | None:
        return message_id_of(payload) if isinstance(payload, dict) else None

    def _read(self, payload: dict[str, Any]) -> str:
        return parse(payload).message_id

    async def _message(self, payload: dict[str, Any]) -> RobotMessage | UpdateOutcome:
        return parse(payload)

    # ---- answering ------------------------------------------------------------------------

    def _request(self, message: RobotMessage) -> Request:
        return read_message(message, self.settings)

    def _chat_of(self, message: RobotMessage) -> ChatRef:
        return self._chat(message.conversation_id, None if message.is_group else message.user_key)

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

    def _envelope(self, message: RobotMessage) -> Envelope:
        return Envelope(
            message_id=message.message_id,
            sender=Sender(message.sender_staff_id or message.sender_id, message.sender_nick),
            is_group=message.is_group,
        )

    def _title(self, message: RobotMessage, ask: Ask) -> str:
        return title_for(ask.text or message.sender_nick)

    async def _pictures(self, message: RobotMessage) -> tuple[ImagePart, ...]:
        images = []
        for code in message.pictures:
            raw = await self._api.download(code)
            images.append(image_part(image_type(raw) or "image/jpeg", raw))
        return tuple(images)
