"""One tenant's WeCom bot: the hooks over the bot skeleton (`channels/bot.py`).

An intelligent robot (`mode: robot`) holds a long connection (`robot.py`, one process of all:
the leader's); each message is kept (by `msgid`) as it arrives and answered on the connection.
Its chats are a person's (`<bot>:<user id>`, memory keyed `wecom:<user id>`) or a group's
(`<bot>:<chatid>`, the tenant's memory).

A self-built app (`mode: app`): WeCom posts each message, encrypted and signed, to
`/channels/<tenant>/<bot>` (after a `GET` that verifies the address) and waits five seconds at
most, so the message is checked, decrypted, kept (by `MsgId`) and acknowledged at once, and
answered afterwards through `message/send`. Each chat is one person's (`<bot>:<user id>`,
memory keyed `wecom:<user id>`): WeCom gives an app no group chat's messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backend.channels.backoff import Sleep
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall, error_body, refused
from backend.channels.bot import Envelope, PlatformBot
from backend.channels.commands import ChatRef, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate, checked_update, fingerprint
from backend.channels.wecom.api import WeComApi, WeComError
from backend.channels.wecom.callback import Callbacks, Forged
from backend.channels.wecom.inbound import (
    WeComMessage,
    message_id_of,
    parse,
    parse_robot,
    read_message,
    robot_message_id_of,
)
from backend.channels.wecom.outbound import PersonReplies, RobotReplies, result_card
from backend.channels.wecom.xmlbody import read_xml
from backend.chat.user_input import image_part, image_type
from backend.domain.inbound import Sender
from backend.domain.messages import ImagePart
from backend.settings.channels_wecom import WeComSettings
from backend.storage.channel_updates import UpdateOutcome

if TYPE_CHECKING:
    from backend.channels.wecom.robot import RobotConnection

RECEIVED = ""  # WeCom's "received": an empty answer (no passive reply)


class WeComChannel(PlatformBot[WeComSettings, WeComMessage, str]):
    KIND = "wecom"
    PLATFORM_ERRORS = (WeComError, OSError)
    PICTURE_ERRORS = (WeComError,)
    PICTURE_UNAVAILABLE = "I could not fetch that picture from WeCom; please send it again."
    ANSWERS_UNCONNECTED = True  # replies go over HTTP

    def _set_up(self, sleep: Sleep) -> None:
        settings = self.settings
        self._api = WeComApi(settings, sleep=sleep)
        self._callbacks: Callbacks | None = None
        self._robot: RobotConnection | None = None
        if settings.mode == "robot":  # only then is the robot's SDK loaded
            from backend.channels.wecom.robot import RobotConnection

            self._robot = RobotConnection(
                settings, status=self.status, keep=self._keep_received, on_error=self._failed
            )
        if settings.mode == "app" and settings.token() and settings.aes_key():
            self._callbacks = Callbacks(
                settings.token() or "", settings.aes_key() or "", settings.corp_id or ""
            )

    # ---- lifecycle ------------------------------------------------------------------------

    async def _receive(self) -> None:
        """A robot: its connection, as the leader. An app: WeCom calls it back, so "connected"
        once WeCom takes its credentials (an access token), retried with backoff until then."""
        if self._robot is not None:
            await self._as_leader(self._robot.run)
            return
        await self._until_it_works("connect", self._api.access_token, errors=(WeComError,))

    async def _stop_receiving(self) -> None:
        if self._robot is not None:
            self._robot.close()

    async def _close(self) -> None:
        await self._api.aclose()

    # ---- receiving ------------------------------------------------------------------------

    async def verify_webhook(self, call: WebhookCall) -> WebhookAnswer:
        if self._callbacks is None:
            return NO_SUCH_BOT
        try:
            return WebhookAnswer(200, {}, text=self._callbacks.echo(call.query))
        except Forged as exc:
            return WebhookAnswer(401, error_body("unauthorized", str(exc)))

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        """As the skeleton's, with WeCom's envelope: the signature is checked and the message
        decrypted before it is read; what WeCom signed but does not read is refused."""
        if self._callbacks is None:
            return NO_SUCH_BOT
        payload: dict[str, Any] = {}
        message = call.body  # until decrypted: WeCom encrypts the same message anew each time
        try:
            message = self._callbacks.open(call.query, call.body)
            payload = checked_update(read_xml(message, what="the message"))
            platform_id = self._read(payload)
        except Forged as exc:
            return WebhookAnswer(401, error_body("unauthorized", str(exc)))
        except RefusedUpdate as exc:
            name = self._platform_id_of(payload) or fingerprint(message)
            await self._inbox.refuse(name, payload, exc.reason)
            return refused(exc.reason)
        refusal = await self._admit(call, platform_id)
        if refusal is not None:
            return refusal
        await self._inbox.keep(platform_id, payload)
        return WebhookAnswer(200, {}, text=RECEIVED)

    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        return None  # `handle_webhook` checks the signature, which needs the body's Encrypt

    async def _admit(self, call: WebhookCall, platform_id: str) -> WebhookAnswer | None:
        """Each signature is remembered with its message (in the database every process
        shares): one seen with another message is refused. (It covers the ciphertext, so only
        a broken sha1 could pair it with another; a redelivery of the same message passes.)"""
        first = await self._services.updates.claim_proof(
            tenant_id=self.tenant_id,
            bot=self.name,
            proof="wecom:" + call.query.get("msg_signature", ""),
            platform_id=platform_id,
        )
        if first != platform_id:
            return WebhookAnswer(
                401, error_body("unauthorized", "this msg_signature came with another message")
            )
        return None

    def _platform_id_of(self, payload: object) -> str | None:
        if not isinstance(payload, dict):
            return None
        return robot_message_id_of(payload) if self._robot else message_id_of(payload)

    def _read(self, payload: dict[str, Any]) -> str:
        return self._parse(payload).message_id

    async def _message(self, payload: dict[str, Any]) -> WeComMessage | UpdateOutcome:
        message = self._parse(payload)
        if message.press and self._robot is not None and message.frame is not None:
            return await self._press(message, self._robot, message.frame)
        return message

    async def _press(
        self, message: WeComMessage, robot: RobotConnection, frame: dict[str, Any]
    ) -> UpdateOutcome:
        """A robot's card button pressed: the choice made, and the card replaced by what it did."""
        if not is_allowed((message.user_id,), self.settings.allow_from):
            return "ignored"
        said = await self._commands.press(message.press, self._chat_of(message))
        await robot.update_card(frame, result_card(message.task_id, said))
        self._count_reply()
        return "answered"

    def _parse(self, payload: dict[str, Any]) -> WeComMessage:
        return parse_robot(payload) if self._robot else parse(payload)

    # ---- answering ------------------------------------------------------------------------

    def _request(self, message: WeComMessage) -> Request:
        return read_message(message, self.settings)

    def _chat_of(self, message: WeComMessage) -> ChatRef:
        if message.is_group:
            return self._chat(message.chat_id, None)
        return self._chat(message.user_id, message.user_key)

    def _replies(self, message: WeComMessage) -> PersonReplies | RobotReplies:
        if self._robot is not None and message.frame is not None:
            return RobotReplies(self._robot, message.frame)
        return PersonReplies(self._api, message.user_id, markdown=self.settings.markdown)

    def _envelope(self, message: WeComMessage) -> Envelope:
        return Envelope(
            message_id=message.message_id,
            sender=Sender(message.user_id, message.user_id),
            is_group=message.is_group,
        )

    async def _pictures(self, message: WeComMessage) -> tuple[ImagePart, ...]:
        images = []
        for media_id in message.pictures:
            raw = await self._api.download(media_id)
            images.append(image_part(image_type(raw) or "image/jpeg", raw))
        return tuple(images)
