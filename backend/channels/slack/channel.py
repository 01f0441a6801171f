"""One tenant's Slack bot: the hooks over the bot skeleton (`channels/bot.py`). Its events
arrive over Socket Mode or as signed Events API calls, and are kept (by `event_id`; a button
press by `action:<trigger_id>`) before Slack is told we have them.

A conversation is a session (`<bot>:<channel id>`): a direct message keeps its person's memory
(`slack:<user id>`, `memory.scope: user`), a channel shares the tenant's. Replies go in the
message's thread.
"""

from __future__ import annotations

import contextvars
import json
from typing import Any
from urllib.parse import parse_qsl

from backend.channels.backoff import Sleep
from backend.channels.base import NO_SUCH_BOT, WebhookAnswer, WebhookCall, error_body
from backend.channels.bot import Envelope, PlatformBot
from backend.channels.commands import ChatRef, Request, answers_a_question, is_allowed
from backend.channels.platform_body import RefusedUpdate, read_body
from backend.channels.slack.api import SlackApi, SlackError
from backend.channels.slack.inbound import (
    Press,
    SlackMessage,
    platform_id_of,
    read_message,
    read_update,
)
from backend.channels.slack.outbound import ThreadReplies
from backend.channels.slack.signature import EventSignatures
from backend.channels.slack.socket import SocketConnection
from backend.chat.user_input import image_part, image_type
from backend.domain.inbound import Sender
from backend.domain.messages import ImagePart
from backend.settings.channels_slack import SlackSettings
from backend.storage.channel_updates import UpdateOutcome

FORM = "application/x-www-form-urlencoded"  # how interactivity payloads are posted
# The call `handle_webhook` checked: the skeleton's own check then passes it (per task).
_CHECKED: contextvars.ContextVar[WebhookCall | None] = contextvars.ContextVar(
    "slack_checked", default=None
)


class SlackChannel(PlatformBot[SlackSettings, SlackMessage, str]):
    KIND = "slack"
    PLATFORM_ERRORS = (SlackError, OSError)
    PICTURE_ERRORS = (SlackError,)
    PICTURE_UNAVAILABLE = "I could not fetch that picture from Slack; please send it again."
    ANSWERS_UNCONNECTED = True  # replies go over the Web API
    CAN_APPROVE = True  # questions come with buttons

    def _set_up(self, sleep: Sleep) -> None:
        self._api = SlackApi(self.settings, sleep=sleep)
        self._signatures = EventSignatures(self.settings.signing_secret() or "")
        self._socket = SocketConnection(
            self._api,
            self.settings.app_token() or "",
            status=self.status,
            keep=self._keep_received,
            on_error=self._failed,
            sleep=sleep,
        )

    # ---- lifecycle ------------------------------------------------------------------------

    async def _receive(self) -> None:
        if self.settings.mode == "socket":  # one socket of all processes: the leader's
            await self._as_leader(self._socket.run)
        else:  # no connection of its own: "connected" once Slack takes the bot token
            await self._until_it_works("connect", self._api.auth_test, errors=(SlackError,))

    async def _stop_receiving(self) -> None:
        await self._socket.aclose()

    # ---- receiving ------------------------------------------------------------------------

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        """Checked here first (the signature covers the raw body), then read: Slack's
        `url_verification` is answered with its challenge, an interactivity call (a form with
        a `payload` field) is read as that payload, and a slash command as its fields."""
        refusal = self._check(call)
        if refusal is not None:
            return refusal
        body = call.body
        if call.headers.get("content-type", "").startswith(FORM):
            body = _form_body(call.body)
        challenge = _challenge(body)
        if challenge is not None:
            return WebhookAnswer(200, {"challenge": challenge})
        checked = WebhookCall(call.headers, body)
        token = _CHECKED.set(checked)
        try:
            return await super().handle_webhook(checked)
        finally:
            _CHECKED.reset(token)

    def _check(self, call: WebhookCall) -> WebhookAnswer | None:
        if self.settings.mode != "events":
            return NO_SUCH_BOT
        problem = self._signatures.problem(
            call.body,
            call.headers.get("x-slack-request-timestamp", ""),
            call.headers.get("x-slack-signature", ""),
        )
        if problem is not None:
            return WebhookAnswer(401, error_body("unauthorized", problem))
        return None

    def _authenticate(self, call: WebhookCall) -> WebhookAnswer | None:
        return None if _CHECKED.get() is call else self._check(call)

    def _platform_id_of(self, payload: object) -> str | None:
        return platform_id_of(payload)

    def _read(self, payload: dict[str, Any]) -> str:
        return read_update(payload)[0]

    async def _message(self, payload: dict[str, Any]) -> SlackMessage | UpdateOutcome:
        _, update = read_update(payload)
        if isinstance(update, Press):
            await self._press(update)
            return "answered"
        return "ignored" if update is None else update

    async def _press(self, press: Press) -> None:
        """A button answered only by its person: anyone else is told so, only them."""
        if not is_allowed((press.user,), self.settings.allow_from):
            await self._api.post_ephemeral(
                press.channel, press.user, "This bot does not take your answers."
            )
            return
        if press.owner and press.owner != press.user:
            await self._api.post_ephemeral(
                press.channel, press.user, f"That question is for <@{press.owner}>."
            )
            return
        chat = self._chat(press.channel, f"slack:{press.user}" if press.is_private else None)
        said = await self._commands.press(press.value, chat)
        shown = f"{press.message_text}\n\n{said}" if answers_a_question(press.value) else said
        await self._api.update(press.channel, press.message_ts, shown)

    # ---- answering ------------------------------------------------------------------------

    def _request(self, message: SlackMessage) -> Request:
        return read_message(message, self.settings, bot_user=self._api.bot_user)

    def _chat_of(self, message: SlackMessage) -> ChatRef:
        return self._chat(message.channel, message.user_key if message.is_private else None)

    def _replies(self, message: SlackMessage) -> ThreadReplies:
        return ThreadReplies(
            self._api,
            message.channel,
            thread_ts=message.reply_thread,
            person=message.user,
            count_reply=self._count_reply,
        )

    def _envelope(self, message: SlackMessage) -> Envelope:
        return Envelope(
            message_id=message.event_id,
            sender=Sender(message.user),
            is_group=not message.is_private,
        )

    async def _pictures(self, message: SlackMessage) -> tuple[ImagePart, ...]:
        images = []
        for file in message.files:
            raw = await self._api.download(file.url)
            images.append(image_part(image_type(raw) or file.mimetype, raw))
        return tuple(images)


def _form_body(body: bytes) -> bytes:
    """A form Slack posts as the JSON the rest reads: interactivity's `payload` field, or a
    slash command's fields."""
    form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    if "payload" in form:
        return form["payload"].encode()
    return json.dumps(form).encode()


def _challenge(body: bytes) -> str | None:
    """Slack's `url_verification` challenge, when the body is one."""
    try:
        value = read_body(body)  # within the limits: the skeleton refuses what does not read
    except RefusedUpdate:
        return None
    if not isinstance(value, dict) or value.get("type") != "url_verification":
        return None
    challenge = value.get("challenge")  # none: refused as no event we know
    return challenge if isinstance(challenge, str) and 0 < len(challenge) <= 200 else None
