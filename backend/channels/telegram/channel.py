"""One tenant's Telegram bot, on `python-telegram-bot`'s `Bot` (the Bot API client).

An update Telegram was told we have is never lost: it is kept in the bot's `Inbox` (by
`update_id`) before the webhook answers 200 or the polling offset moves past it, and answered
once, after a crash too. One the bot cannot read (`platform_body.py`, `update.py`) is recorded
as refused and answered 200 all the same, so Telegram stops delivering it again. Messages of
one chat are answered in order; commands do not wait behind a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, BotCommand, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import TelegramError
from telegram.request import HTTPXRequest

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
from backend.channels.commands import (
    DESCRIPTIONS,
    ChatRef,
    Command,
    CommandReply,
    Commands,
    answers_a_question,
    is_allowed,
)
from backend.channels.context import ChannelServices
from backend.channels.inbox import Inbox
from backend.channels.leadership import run_as_leader
from backend.channels.platform_body import RefusedUpdate, checked_update, fingerprint, read_body
from backend.channels.telegram.format import telegram_chunks
from backend.channels.telegram.inbound import read_message
from backend.channels.telegram.outbound import Outbox
from backend.channels.telegram.turns import TelegramTurns
from backend.channels.telegram.update import PollingBot, read_update, update_id_of
from backend.channels.turns import ChannelTurns
from backend.metrics.registry import CHANNEL_EVENTS
from backend.settings.channels import TelegramBotSettings
from backend.storage.channel_updates import ChannelUpdate, UpdateOutcome

CHANNEL = "telegram"
ALLOWED_UPDATES = ("message", "callback_query")


class TelegramChannel:
    def __init__(
        self,
        *,
        tenant_id: str,
        name: str,
        settings: TelegramBotSettings,
        services: ChannelServices,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.tenant_id = tenant_id
        self.name = name
        self.settings = settings
        self.status = ChannelStatus(tenant_id, name, CHANNEL, settings.mode)
        api = settings.api_base_url.rstrip("/")
        self._bot = PollingBot(
            settings.token() or "",
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=HTTPXRequest(connect_timeout=10, read_timeout=30, write_timeout=30),
            get_updates_request=HTTPXRequest(
                connect_timeout=10, read_timeout=settings.poll_timeout_s + 15
            ),
        )
        self._sleep = sleep
        self._services = services
        self._outbox = Outbox(self._bot, sleep=sleep)
        self._commands = Commands(services)
        turns = ChannelTurns(services, kind=CHANNEL, bot=name)
        self._turns = TelegramTurns(self, turns, self._outbox)
        self._inbox = Inbox(
            status=self.status,
            services=services,
            handle=self._handle,
            platform_errors=(TelegramError, OSError),
            on_error=self._failed,
        )
        self._runner: asyncio.Task[None] | None = None

    @property
    def bot(self) -> Bot:
        return self._bot

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        unanswered = await self._inbox.unanswered()
        self._runner = asyncio.create_task(self._run(unanswered), name=f"telegram {self.name}")

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        await self._inbox.close()
        self.status.is_connected = False
        with contextlib.suppress(TelegramError, RuntimeError):
            await self._bot.shutdown()

    async def settle(self) -> None:
        """Until every update in hand is answered (tests, and a graceful stop)."""
        await self._inbox.settle()

    async def _run(self, unanswered: list[ChannelUpdate]) -> None:
        await self._with_retries("connect", self._bot.initialize)  # getMe: who we are
        self._inbox.open(unanswered)  # answers wait for it: it names the bot's mentions
        lock = ("tally.bot", self.tenant_id, self.name)
        await run_as_leader(self._services.database, lock, self._lead)

    async def _lead(self) -> None:
        """The leader's part (one process of all): register with Telegram, then poll, or hold
        the lead while any process takes the webhook's calls."""
        self.status.is_leader = True
        try:
            await self._with_retries("connect", self._register)
            if self.settings.mode == "polling":
                await self._poll()
            else:
                await asyncio.Event().wait()
        finally:
            self.status.is_leader = False

    async def _register(self) -> None:
        commands = [BotCommand(name, text) for name, text in DESCRIPTIONS.items()]
        await self._bot.set_my_commands(commands)
        if self.settings.mode == "webhook":
            assert self.settings.webhook_url is not None
            await self._bot.set_webhook(
                self.settings.webhook_url,
                secret_token=self.settings.webhook_secret(),
                allowed_updates=ALLOWED_UPDATES,
            )
        else:  # Telegram answers 409 to getUpdates while a webhook is set
            await self._bot.delete_webhook()

    async def _poll(self) -> None:
        offset: int | None = None
        while True:
            updates = await self._with_retries(
                "poll", functools.partial(self._updates_from, offset)
            )
            for update in updates:  # kept before the next call's offset confirms them
                await self._keep_polled(update)
            ids = [update_id for u in updates if (update_id := update_id_of(u)) is not None]
            if ids:
                offset = max(ids) + 1

    async def _keep_polled(self, raw: object) -> None:
        """A polled update, read as a webhook's is."""
        payload: dict[str, Any] = {}
        update_id = update_id_of(raw)
        try:
            payload = checked_update(raw)
            read_update(payload, self._bot)
        except RefusedUpdate as exc:
            name = str(update_id) if update_id is not None else fingerprint(repr(raw).encode())
            await self._inbox.refuse(name, payload, exc.reason)
            return
        await self._inbox.keep(str(update_id), payload)

    async def _updates_from(self, offset: int | None) -> list[object]:
        return await self._bot.raw_updates(
            offset=offset, wait_s=self.settings.poll_timeout_s, allowed_updates=ALLOWED_UPDATES
        )

    async def _with_retries(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """`call`, retried with backoff while Telegram cannot be reached (recorded in status)."""
        errors = (TelegramError, OSError)
        result = await until_it_works(
            call, what=what, errors=errors, on_error=self._failed, sleep=self._sleep
        )
        self.status.is_connected = True
        return result

    # ---- receiving ------------------------------------------------------------------------

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        expected = self.settings.webhook_secret() or ""
        offered = call.headers.get("x-telegram-bot-api-secret-token", "")
        if self.settings.mode != "webhook" or not expected:
            return NO_SUCH_BOT
        if not hmac.compare_digest(offered.encode(), expected.encode()):
            return WebhookAnswer(401, error_body("unauthorized", "wrong or missing secret token"))
        payload: dict[str, Any] = {}
        try:
            payload = read_body(call.body)
            read_update(payload, self._bot)
        except RefusedUpdate as exc:
            update_id = update_id_of(payload)
            name = fingerprint(call.body) if update_id is None else str(update_id)
            await self._inbox.refuse(name, payload, exc.reason)
            return refused(exc.reason)
        await self._inbox.keep(str(payload["update_id"]), payload)
        return WebhookAnswer(200, {"ok": True})

    async def _handle(
        self, platform_id: str, payload: dict[str, Any], chunks_sent: int
    ) -> UpdateOutcome:
        update = read_update(payload, self._bot)
        if update.callback_query is not None:
            await self._press(update)
            return "answered"
        message = update.message
        if message is None:
            return "ignored"
        request = read_message(
            message, self.settings, bot_id=self._bot.id, bot_username=self._bot.username
        )
        if request is None:
            return "ignored"
        chat = self.chat_ref(message)
        if isinstance(request, Command):
            await self.reply(message.chat_id, await self._commands.run(request, chat))
            return "answered"
        async with self._inbox.chat_lock(str(message.chat_id)):
            await self._turns.answer(message, request, chat, platform_id, chunks_sent)
        return "answered"

    async def _press(self, update: Update) -> None:
        query = update.callback_query
        assert query is not None
        message = query.message
        sender = query.from_user
        if not isinstance(message, Message) or query.data is None:
            await query.answer()
            return
        if not is_allowed((str(sender.id), sender.username or ""), self.settings.allow_from):
            await query.answer("This bot does not take your answers.")  # as it ignores you
            return
        chat = ChatRef(
            self.tenant_id,
            CHANNEL,
            self._external_key(message.chat_id),
            _user_key(query.from_user.id),
        )
        said = await self._commands.press(query.data, chat)
        await query.answer(said)
        shown = f"{message.text}\n\n{said}" if answers_a_question(query.data) else said
        await self._bot.edit_message_text(
            shown, chat_id=message.chat_id, message_id=message.message_id
        )

    # ---- sending --------------------------------------------------------------------------

    async def reply(self, chat_id: int, reply: CommandReply) -> None:
        markup = None
        if reply.choices:
            rows = [[InlineKeyboardButton(c.label, callback_data=c.data)] for c in reply.choices]
            markup = InlineKeyboardMarkup(rows)
        chunks = telegram_chunks(reply.text)
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            await self._outbox.send_chunk(chat_id, chunk, reply_markup=markup if last else None)
        CHANNEL_EVENTS.labels(self.tenant_id, self.name, "reply").inc()

    def chat_ref(self, message: Message) -> ChatRef:
        """The chat service's name for `message`'s chat: private chats key memory by person."""
        sender = message.from_user
        is_private = message.chat.type == "private" and sender is not None
        user_key = _user_key(sender.id) if is_private and sender is not None else None
        return ChatRef(self.tenant_id, CHANNEL, self._external_key(message.chat_id), user_key)

    def _external_key(self, chat_id: int) -> str:
        return f"{self.name}:{chat_id}"

    def _failed(self, what: str, error: BaseException) -> None:
        note_failure(self.status, what, error, connection_lost=what in ("connect", "poll"))


def _user_key(user_id: int) -> str:
    return f"telegram:{user_id}"
