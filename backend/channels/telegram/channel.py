"""One tenant's Telegram bot, on `python-telegram-bot`'s `Bot` (the Bot API client).

An update Telegram was told we have is never lost: it is recorded (deduplicated by bot and
`update_id`) before the webhook answers 200 or the polling offset moves past it, then answered
in the background; after a crash, recorded but unanswered updates are answered at start, once
(the message id is the turn's idempotency key, and the reply's chunks already sent are
counted). Messages of one chat are answered in order; commands do not wait behind a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from telegram import Bot, BotCommand, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import TelegramError
from telegram.request import HTTPXRequest

from backend.channel_settings import TelegramBotSettings
from backend.channels.base import NO_SUCH_BOT, ChannelStatus, WebhookAnswer, WebhookCall
from backend.channels.commands import DESCRIPTIONS, ChatRef, CommandReply, Commands
from backend.channels.context import ChannelServices
from backend.channels.telegram.format import telegram_chunks
from backend.channels.telegram.inbound import Command, read_message
from backend.channels.telegram.outbound import Outbox
from backend.channels.telegram.turns import TelegramTurns
from backend.metrics import CHANNEL_EVENTS
from backend.storage.channel_updates import ChannelUpdate

log = logging.getLogger(__name__)

CHANNEL = "telegram"
ALLOWED_UPDATES = ("message", "callback_query")
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0
STOP_GRACE_S = 10.0


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
        self._bot = Bot(
            settings.token() or "",
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=HTTPXRequest(connect_timeout=10, read_timeout=30, write_timeout=30),
            get_updates_request=HTTPXRequest(
                connect_timeout=10, read_timeout=settings.poll_timeout_s + 15
            ),
        )
        self._services = services
        self._sleep = sleep
        self._outbox = Outbox(self._bot, sleep=sleep)
        self._commands = Commands(services)
        self._turns = TelegramTurns(self, services, self._outbox)
        self._runner: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._chat_locks: dict[int, asyncio.Lock] = {}
        self._connected = asyncio.Event()

    @property
    def bot(self) -> Bot:
        return self._bot

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        # Read before any update can arrive: one that arrives meanwhile is in hand, not unanswered.
        unanswered = await self._services.updates.unanswered(
            tenant_id=self.tenant_id, bot=self.name
        )
        self._runner = asyncio.create_task(self._run(unanswered), name=f"telegram {self.name}")

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        if self._tasks:  # replies in hand get a moment; unfinished ones resume at next start
            _, pending = await asyncio.wait(self._tasks, timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self.status.is_connected = False
        with contextlib.suppress(TelegramError, RuntimeError):
            await self._bot.shutdown()

    async def settle(self) -> None:
        """Until every update in hand is answered (tests, and a graceful stop)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _run(self, unanswered: list[ChannelUpdate]) -> None:
        await self._with_retries("connect", self._connect)
        self._connected.set()
        for update in unanswered:  # a previous process stored them, then stopped
            self._schedule(update.payload, update.chunks_sent)
        if self.settings.mode == "polling":
            await self._poll()

    async def _connect(self) -> None:
        await self._bot.initialize()  # getMe: the bot's id and username
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
        self.status.is_connected = True

    async def _poll(self) -> None:
        offset: int | None = None
        while True:
            updates = await self._with_retries(
                "poll", functools.partial(self._updates_from, offset)
            )
            for update in updates:  # kept before the next call's offset confirms them
                await self._intake(update.to_dict())
            if updates:
                offset = updates[-1].update_id + 1

    async def _updates_from(self, offset: int | None) -> tuple[Update, ...]:
        return await self._bot.get_updates(
            offset=offset, timeout=self.settings.poll_timeout_s, allowed_updates=ALLOWED_UPDATES
        )

    async def _with_retries(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """`call`, retried with backoff while Telegram cannot be reached (recorded in status)."""
        delay = RETRY_FIRST_S
        while True:
            try:
                result = await call()
            except (TelegramError, OSError) as exc:
                self._failed(what, exc)
                await self._sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            self.status.is_connected = True
            return result

    # ---- receiving ------------------------------------------------------------------------

    async def handle_webhook(self, call: WebhookCall) -> WebhookAnswer:
        expected = self.settings.webhook_secret() or ""
        offered = call.headers.get("x-telegram-bot-api-secret-token", "")
        if self.settings.mode != "webhook" or not expected:
            return NO_SUCH_BOT
        if not hmac.compare_digest(offered.encode(), expected.encode()):
            return WebhookAnswer(401, _error("unauthorized", "wrong or missing secret token"))
        try:
            payload = json.loads(call.body)
        except (ValueError, UnicodeDecodeError):
            return WebhookAnswer(400, _error("invalid_json", "the update is not JSON"))
        if not isinstance(payload, dict) or not isinstance(payload.get("update_id"), int):
            return WebhookAnswer(400, _error("invalid_update", "an update needs an update_id"))
        await self._intake(payload)
        return WebhookAnswer(200, {"ok": True})

    async def _intake(self, payload: dict[str, Any]) -> None:
        is_new = await self._services.updates.record(
            tenant_id=self.tenant_id,
            bot=self.name,
            platform_id=str(payload["update_id"]),
            payload=payload,
        )
        self.status.last_update_at = datetime.now(UTC)
        CHANNEL_EVENTS.labels(self.tenant_id, self.name, "update").inc()
        if is_new:  # a duplicate was answered (or is being answered) already
            self._schedule(payload, 0)

    def _schedule(self, payload: dict[str, Any], chunks_sent: int) -> None:
        task = asyncio.create_task(self._answer(payload, chunks_sent))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, payload: dict[str, Any], chunks_sent: int) -> None:
        platform_id = str(payload["update_id"])
        await self._connected.wait()  # a webhook may deliver before getMe told us who we are
        try:
            outcome = await self._handle(payload, chunks_sent, platform_id)
            error = None
        except (TelegramError, OSError) as exc:
            self._failed("reply", exc)
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # logged with the update, never lost silently
            log.exception("telegram %s: update %s failed", self.name, platform_id)
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"
        await self._services.updates.finish(
            tenant_id=self.tenant_id,
            bot=self.name,
            platform_id=platform_id,
            status=outcome,
            error=error,
        )

    async def _handle(self, payload: dict[str, Any], chunks_sent: int, platform_id: str) -> Any:
        update = Update.de_json(payload, self._bot)
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
            await self.reply(message.chat_id, await self._commands.run(request.name, chat))
            return "answered"
        async with self._chat_locks.setdefault(message.chat_id, asyncio.Lock()):
            await self._turns.answer(message, request, chat, platform_id, chunks_sent)
        return "answered"

    async def _press(self, update: Update) -> None:
        query = update.callback_query
        assert query is not None
        message = query.message
        if not isinstance(message, Message) or query.data is None:
            await query.answer()
            return
        chat = ChatRef(
            self.tenant_id,
            CHANNEL,
            self._external_key(message.chat_id),
            _user_key(query.from_user.id),
        )
        said = await self._commands.press(query.data, chat)
        await query.answer(said)
        await self._bot.edit_message_text(
            said, chat_id=message.chat_id, message_id=message.message_id
        )

    # ---- sending --------------------------------------------------------------------------

    async def send(self, chat: str, text: str) -> None:
        await self._outbox.send_chunks(int(chat), telegram_chunks(text))

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
        self.status.is_connected = what not in ("connect", "poll")
        self.status.last_error = f"{what}: {type(error).__name__}: {error}"
        self.status.last_error_at = datetime.now(UTC)
        CHANNEL_EVENTS.labels(self.tenant_id, self.name, "error").inc()
        log.warning(
            "telegram %s: %s failed: %s", self.name, what, error, extra={"tenant": self.tenant_id}
        )


def _user_key(user_id: int) -> str:
    return f"telegram:{user_id}"


def _error(code: str, message: str) -> dict[str, object]:
    return {"error": {"code": code, "message": message}}
