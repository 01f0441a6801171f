"""One tenant's Feishu (or Lark) bot: the hooks over the bot skeleton (`channels/bot.py`). Its
events arrive over the SDK's long connection or as encrypted, signed HTTP posts, and are kept
(by `event_id`) before Feishu is told we have them; replies go over the OpenAPI.

A chat is a session (`<bot>:<chat_id>`): a private chat keeps its person's memory
(`feishu:<open id>`), a group shares the tenant's. A card's button answers only the person it
was shown for: anyone else is told so at once, and nothing is kept.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from backend.channels.backoff import Sleep
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall, error_body, refused
from backend.channels.bot import Envelope, PlatformBot
from backend.channels.commands import Ask, ChatRef, Request, is_allowed
from backend.channels.feishu.format import post_content
from backend.channels.feishu.inbound import (
    ButtonPress,
    FeishuMessage,
    OtherEvent,
    event_id_of,
    header_token,
    parse,
    read_message,
)
from backend.channels.feishu.longconn import LongConnection
from backend.channels.feishu.openapi import FeishuApi, FeishuError
from backend.channels.feishu.outbound import ThreadReplies
from backend.channels.feishu.webhook import EventSignatures, challenge_of, proof
from backend.channels.platform_body import RefusedUpdate, fingerprint, read_body
from backend.channels.turns import title_for
from backend.chat.user_input import image_part, image_type
from backend.domain.inbound import Sender
from backend.domain.messages import ImagePart
from backend.settings.channels_feishu import FeishuSettings
from backend.storage.channel_updates import UpdateOutcome

NOT_YOURS = {"toast": {"type": "warning", "content": "This button is not yours to press."}}


class FeishuChannel(PlatformBot[FeishuSettings, FeishuMessage, str]):
    KIND = "feishu"
    PLATFORM_ERRORS = (FeishuError, OSError)
    PICTURE_ERRORS = (FeishuError,)
    PICTURE_UNAVAILABLE = "I could not fetch that picture from Feishu; please send it again."
    CAN_APPROVE = True  # asked with buttons on a card
    WEBHOOK_RECEIVED = {}  # the skeleton's ClassVar; Feishu reads no body

    def _set_up(self, sleep: Sleep) -> None:
        settings = self.settings
        self._api = FeishuApi(settings, sleep=sleep)
        self._bot_open_id = ""  # how mentions name the bot, once connected
        self._signatures = EventSignatures(
            settings.encrypt_key() or "", settings.verification_token() or ""
        )
        self._connection = LongConnection(
            settings, status=self.status, receive=self._take, on_error=self._failed
        )

    # ---- lifecycle ------------------------------------------------------------------------

    async def _connect(self) -> None:
        bot = await self._until_it_works("connect", self._api.bot_info)
        self._bot_open_id = str(bot["open_id"])

    async def _receive(self) -> None:
        if self.settings.mode == "websocket":  # one connection of all processes: the leader's
            await self._as_leader(self._connection.run)
        else:
            await asyncio.Event().wait()  # Feishu posts to the webhook route

    async def _close(self) -> None:
        await self._api.aclose()

    # ---- receiving ------------------------------------------------------------------------

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        """An event Feishu posted: decrypted, its signature and time checked, refused when
        delivered before; the URL check answered with its challenge."""
        if self.settings.mode != "webhook":
            return NO_SUCH_BOT
        problem = self._signatures.problem(call)
        plain = call.body  # named by what it says: each delivery is encrypted afresh
        try:
            plain = self._signatures.decrypted(call.body)
            payload = read_body(plain)
        except RefusedUpdate as exc:
            if problem is not None:
                return _unauthorized(problem)
            await self._inbox.refuse(fingerprint(plain), {}, exc.reason)
            return refused(exc.reason)
        challenge = challenge_of(payload)
        if challenge is not None:  # sent unsigned; the token proves it is Feishu's
            if not self._signatures.token_matches(str(payload.get("token", ""))):
                return _unauthorized("wrong verification token")
            return WebhookAnswer(200, {"challenge": challenge})
        if problem is not None:
            return _unauthorized(problem)
        try:
            if not self._signatures.token_matches(header_token(payload)):
                # Signed with the Encrypt Key, so Feishu's; but not this app's event.
                raise RefusedUpdate("the event's verification token is not this app's")
            platform_id = self._read(payload)
        except RefusedUpdate as exc:
            name = self._platform_id_of(payload) or fingerprint(plain)
            await self._inbox.refuse(name, payload, exc.reason)
            return refused(exc.reason)
        if _not_theirs(payload):
            return WebhookAnswer(200, dict(NOT_YOURS))
        # Kept first: a request whose keeping failed (503) may come again as it was. A replay
        # is the same body, so the same event: keeping it again changes nothing.
        await self._inbox.keep(platform_id, payload)
        if not await self._first_delivery(call, platform_id):
            return _unauthorized("this request was delivered before")
        return WebhookAnswer(200, dict(self.WEBHOOK_RECEIVED))

    async def _first_delivery(self, call: WebhookCall, platform_id: str) -> bool:
        """Whether this signed request is new: each is remembered (every process shares the
        record), so one captured and sent again is refused."""
        mine = f"{platform_id} {secrets.token_hex(8)}"
        first = await self._services.updates.claim_proof(
            tenant_id=self.tenant_id, bot=self.name, proof=proof(call), platform_id=mine
        )
        return first == mine

    async def _take(self, body: bytes) -> dict[str, Any] | None:
        """An event received on the long connection, kept (or refused) before the SDK
        acknowledges it; the acknowledgement's data, a card's toast, when there is one."""
        try:
            payload = read_body(body)
        except RefusedUpdate as exc:
            await self._inbox.refuse(fingerprint(body), {}, exc.reason)
            return None
        if _not_theirs(payload):
            return dict(NOT_YOURS)
        await self._keep_received(payload)
        return None

    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        return None if self.settings.mode == "webhook" else NO_SUCH_BOT  # see handle_webhook

    def _platform_id_of(self, payload: object) -> str | None:
        return event_id_of(payload)

    def _read(self, payload: dict[str, Any]) -> str:
        parse(payload)
        event_id = event_id_of(payload)
        assert event_id is not None  # parse read it
        return event_id

    async def _message(self, payload: dict[str, Any]) -> FeishuMessage | UpdateOutcome:
        event = parse(payload)
        if isinstance(event, ButtonPress):
            return await self._press(event)
        if isinstance(event, OtherEvent):
            return "ignored"
        return event

    async def _press(self, press: ButtonPress) -> UpdateOutcome:
        if press.owner and press.operator_open_id != press.owner:
            return "ignored"  # told so when it arrived
        if not is_allowed(
            (press.operator_open_id, press.operator_user_id), self.settings.allow_from
        ):
            return "ignored"
        user_key = f"feishu:{press.operator_open_id}" if press.is_private else None
        said = await self._commands.press(press.data, self._chat(press.chat_id, user_key))
        await self._api.reply(press.message_id, "post", post_content(said))
        self._count_reply()
        return "answered"

    # ---- answering ------------------------------------------------------------------------

    def _request(self, message: FeishuMessage) -> Request:
        return read_message(message, self.settings, self._bot_open_id)

    def _chat_of(self, message: FeishuMessage) -> ChatRef:
        return self._chat(message.chat_id, None if message.is_group else message.user_key)

    def _replies(self, message: FeishuMessage) -> ThreadReplies:
        return ThreadReplies(
            self._api,
            message.message_id,
            owner=message.sender_open_id,
            chat_id=message.chat_id,
            is_private=not message.is_group,
            count_reply=self._count_reply,
        )

    def _envelope(self, message: FeishuMessage) -> Envelope:
        return Envelope(
            message_id=message.message_id,
            sender=Sender(message.sender_user_id or message.sender_open_id),
            is_group=message.is_group,
        )

    def _title(self, message: FeishuMessage, ask: Ask) -> str:
        return title_for(ask.text or "A picture")

    async def _pictures(self, message: FeishuMessage) -> tuple[ImagePart, ...]:
        images = []
        for key in message.images:
            raw = await self._api.resource(message.message_id, key)
            images.append(image_part(image_type(raw) or "image/jpeg", raw))
        return tuple(images)


def _not_theirs(payload: dict[str, Any]) -> bool:
    """A card's button pressed by someone other than the person it was shown for."""
    try:
        event = parse(payload)
    except RefusedUpdate:
        return False  # kept, and refused there
    return (
        isinstance(event, ButtonPress)
        and bool(event.owner)
        and (event.operator_open_id != event.owner)
    )


def _unauthorized(problem: str) -> WebhookAnswer:
    return WebhookAnswer(401, error_body("unauthorized", problem))
