"""One tenant's QQ bot: the hooks over the bot skeleton (`channels/bot.py`). Its events arrive
as signed webhook calls or over the websocket gateway, and are kept (by QQ's message id)
before QQ is told we have them.

A chat is a session (`<bot>:<group openid>` or `<bot>:<user openid>`): a private chat keeps
its user's memory (`memory.scope: user`, `qq:<user openid>`), a group shares the tenant's.
"""

from __future__ import annotations

import secrets
from typing import Any

from backend.channels.backoff import Sleep
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall, error_body, refused
from backend.channels.bot import Envelope, PlatformBot
from backend.channels.commands import ChatRef, Request
from backend.channels.platform_body import RefusedUpdate, read_body
from backend.channels.qq.gateway import GatewayConnection
from backend.channels.qq.inbound import (
    QQMessage,
    message_id_of,
    other_event_id,
    parse,
    read_message,
)
from backend.channels.qq.openapi import QQApi, QQError
from backend.channels.qq.outbound import QQReplies, ReplySequence
from backend.channels.qq.signature import WebhookSignatures, could_be_a_validation_answer
from backend.chat.user_input import image_part, image_type
from backend.domain.inbound import Sender
from backend.domain.messages import ImagePart
from backend.settings.channels_qq import QQSettings
from backend.storage.channel_updates import UpdateOutcome

VALIDATION = 13  # op: QQ checks the callback URL


class QQChannel(PlatformBot[QQSettings, QQMessage, str]):
    KIND = "qq"
    PLATFORM_ERRORS = (QQError, OSError)
    PICTURE_ERRORS = (QQError,)
    PICTURE_UNAVAILABLE = "I could not fetch that picture from QQ; please send it again."
    ANSWERS_UNCONNECTED = True  # replies go over HTTP
    WEBHOOK_RECEIVED = {"op": 12, "d": 0}  # HTTP callback ACK

    def _set_up(self, sleep: Sleep) -> None:
        self._api = QQApi(self.settings, sleep=sleep)
        self._signatures = WebhookSignatures(self.settings.app_secret() or "")
        self._sequence = ReplySequence(
            self._services.updates, tenant_id=self.tenant_id, bot=self.name
        )
        self._gateway = GatewayConnection(
            self._api,
            status=self.status,
            keep=self._keep_received,
            refuse=lambda name, reason: self._inbox.refuse(name, {}, reason),
            on_error=self._failed,
            sleep=sleep,
        )

    # ---- lifecycle ------------------------------------------------------------------------

    async def _receive(self) -> None:
        if self.settings.mode == "websocket":  # one gateway connection of all: the leader's
            await self._as_leader(self._gateway.run)
        else:  # "connected" once QQ takes the app's credentials, retried until it does
            await self._until_it_works("connect", self._api.access_token, errors=(QQError,))

    async def _close(self) -> None:
        await self._api.aclose()

    # ---- receiving ------------------------------------------------------------------------

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        """QQ's callback validation (op 13) is answered here and kept nowhere; every other
        call is an event, checked and kept by the skeleton."""
        if self.settings.mode != "webhook":
            return NO_SUCH_BOT
        try:
            payload = read_body(call.body)
        except RefusedUpdate:
            payload = {}
        if payload.get("op") == VALIDATION:
            answer = self._signatures.validation(payload.get("d"))
            if answer is None:  # said like any refused body: 200, and why (nothing kept)
                return refused("not a fresh, well-formed callback validation")
            return WebhookAnswer(200, answer)
        if could_be_a_validation_answer(call.body):
            # Our answer to an op 13 (asked by anyone) signs "<event_ts><plain_token>": cut
            # after the timestamp, it reads as a signed call whose body is the token. Such a
            # body is no event either way: refused without a record, so none can fill the table.
            return self._authenticate(call) or refused("not a QQ event")
        kept = await super().handle_webhook(call)
        if kept.status == 200 and "refused" in kept.body:  # received all the same: said so
            return WebhookAnswer(200, {**self.WEBHOOK_RECEIVED, **kept.body})
        return kept

    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        if self.settings.mode != "webhook":
            return NO_SUCH_BOT
        problem = self._signatures.problem(
            call.headers.get("x-signature-timestamp", ""),
            call.headers.get("x-signature-ed25519", ""),
            call.body,
        )
        if problem is not None:
            return WebhookAnswer(401, error_body("unauthorized", problem))
        return None

    async def _admit(self, call: WebhookCall, platform_id: str) -> WebhookAnswer | None:
        """A signature already used is a replay: each is claimed once, in the database."""
        mine = secrets.token_hex(8)
        first = await self._services.updates.claim_proof(
            tenant_id=self.tenant_id,
            bot=self.name,
            proof="qq-signature:" + call.headers.get("x-signature-ed25519", ""),
            platform_id=mine,
        )
        if first != mine:
            return WebhookAnswer(401, error_body("unauthorized", "this signature came before"))
        return None

    def _platform_id_of(self, payload: object) -> str | None:
        return message_id_of(payload) if isinstance(payload, dict) else None

    def _read(self, payload: dict[str, Any]) -> str:
        return other_event_id(payload) or parse(payload).message_id

    async def _message(self, payload: dict[str, Any]) -> QQMessage | UpdateOutcome:
        if other_event_id(payload) is not None:
            return "ignored"  # an event of the intents that carries no message to answer
        return parse(payload)

    # ---- answering ------------------------------------------------------------------------

    def _request(self, message: QQMessage) -> Request:
        return read_message(message, self.settings)

    def _chat_of(self, message: QQMessage) -> ChatRef:
        return self._chat(message.chat_id, None if message.is_group else message.user_key)

    def _replies(self, message: QQMessage) -> QQReplies:
        return QQReplies(
            self._api,
            self._sequence,
            group=message.is_group,
            openid=message.chat_id,
            msg_id=message.message_id,
            markdown=self.settings.markdown,
        )

    def _envelope(self, message: QQMessage) -> Envelope:
        return Envelope(
            message_id=message.message_id,
            sender=Sender(message.sender_openid, message.sender_openid[:12]),
            is_group=message.is_group,
        )

    async def _pictures(self, message: QQMessage) -> tuple[ImagePart, ...]:
        images = []
        for url in message.pictures:
            raw = await self._api.download(url)
            media_type = image_type(raw)
            if media_type is None:
                raise QQError("the picture QQ handed over is no image we read")
            images.append(image_part(media_type, raw))
        return tuple(images)
