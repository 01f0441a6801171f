"""A fake Telegram Bot API server: the methods a bot uses, over real HTTP on 127.0.0.1.

`python-telegram-bot` talks to it with `.base_url(f"{server.base_url}/bot")` and
`.base_file_url(f"{server.base_url}/file/bot")`. Like the real one it answers
`/bot<token>/<method>` with `{"ok": true, "result": ...}` or `{"ok": false, "error_code",
"description", "parameters"}`, accepts JSON and form-encoded bodies, long-polls `getUpdates`
(honouring `offset` and `timeout`; 409 while a webhook is set), refuses a message over 4,096
characters, and serves files at `/file/bot<token>/<path>`.

Tests play the user: `user_message(...)` builds an update, which `push_update` queues for
polling (or a test posts it to the bot's webhook itself); `wait_for_sent` waits until the bot has
sent what a test expects. `fail_next(method, ...)` scripts an error (a 429 with `retry_after`,
a 400 "can't parse entities"). Thread-safe: the server runs its own loop in a thread.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from . import FakeServer, HttpError, RecordedRequest, Reply

MAX_MESSAGE_CHARS = 4096
MAX_POLL_S = 50.0


@dataclass
class Bot:
    token: str
    id: int
    username: str
    webhook: dict[str, Any] | None = None  # setWebhook's parameters while one is set
    commands: list[dict[str, str]] = field(default_factory=list)
    confirmed: int = 0  # getUpdates' offset: updates below it are gone
    updates: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Sent:
    """One call the bot made that shows in a chat: a message, an edit, a chat action."""

    method: str
    token: str  # the bot that made it
    chat_id: int
    text: str
    parse_mode: str | None
    params: dict[str, Any]
    message_id: int


class FakeTelegramServer(FakeServer):
    label = "telegram"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._lock = threading.RLock()  # a waiting test's condition reads under it too
        self.bots: dict[str, Bot] = {}
        self.files: dict[str, bytes] = {}  # file_id -> content
        self._sent: list[Sent] = []
        self._failures: deque[tuple[str, HttpError]] = deque()
        self._changed = threading.Condition(self._lock)
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._pollers: set[asyncio.Event] = set()  # one per getUpdates call waiting

    # -- the test's side --

    def add_bot(self, token: str, username: str = "tally_test_bot") -> Bot:
        bot = Bot(token=token, id=7_000_000 + len(self.bots), username=username)
        with self._lock:
            self.bots[token] = bot
        return bot

    def user_message(
        self,
        text: str = "",
        *,
        chat_id: int = 42,
        user_id: int = 42,
        username: str = "ada",
        first_name: str = "Ada",
        chat_type: str = "private",
        entities: list[dict[str, Any]] | None = None,
        reply_to: dict[str, Any] | None = None,
        photo_file_id: str | None = None,
    ) -> dict[str, Any]:
        """An update carrying one message from a user, as Telegram would deliver it."""
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat.update(first_name=first_name, username=username)
        else:
            chat["title"] = "A group"
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
        }
        if username:
            message["from"]["username"] = username
        if photo_file_id is not None:
            size = len(self.files.get(photo_file_id, b""))
            message["photo"] = [
                {
                    "file_id": photo_file_id,
                    "file_unique_id": photo_file_id + "u",
                    "width": 8,
                    "height": 8,
                    "file_size": size,
                }
            ]
            if text:
                message["caption"] = text
        else:
            message["text"] = text
        if text.startswith("/"):
            command = text.split()[0]
            entities = [{"type": "bot_command", "offset": 0, "length": len(command)}]
        if entities:
            message["caption_entities" if photo_file_id else "entities"] = entities
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        return {"update_id": next(self._update_ids), "message": message}

    def button_press(
        self,
        message: Sent,
        data: str,
        *,
        chat_id: int = 42,
        user_id: int = 42,
        username: str = "ada",
    ) -> dict[str, Any]:
        """An update for a press on an inline button of `message`, the bot's own message."""
        return {
            "update_id": next(self._update_ids),
            "callback_query": {
                "id": str(next(self._message_ids)),
                "from": {"id": user_id, "is_bot": False, "first_name": "Ada", "username": username},
                "chat_instance": "ci",
                "data": data,
                "message": {
                    "message_id": message.message_id,
                    "date": int(time.time()),
                    "chat": {"id": chat_id, "type": "private"},
                    "text": message.text,
                },
            },
        }

    def push_update(self, token: str, update: dict[str, Any]) -> None:
        """Queue `update` for the bot's long polling."""
        with self._changed:
            self.bots[token].updates.append(update)
            self._changed.notify_all()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake_pollers)

    def _wake_pollers(self) -> None:
        for event in self._pollers:
            event.set()

    def fail_next(self, method: str, error: HttpError) -> None:
        """The next call of `method` (by any bot) answers `error`."""
        with self._lock:
            self._failures.append((method, error))

    def sent(self, chat_id: int | None = None, method: str | None = None) -> list[Sent]:
        with self._lock:
            return [
                s
                for s in self._sent
                if (chat_id is None or s.chat_id == chat_id)
                and (method is None or s.method == method)
            ]

    def wait_for_sent(
        self,
        count: int,
        *,
        chat_id: int | None = None,
        method: str = "sendMessage",
        timeout: float = 60.0,
    ) -> list[Sent]:
        """Until the bot has sent at least `count` of `method` (to `chat_id`); those calls."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [
                    s
                    for s in self._sent
                    if s.method == method and (chat_id is None or s.chat_id == chat_id)
                ]
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"the bot sent {len(found)} {method}, not {count}, in {timeout} s:"
                        f" {[s.text for s in self._sent]}"
                    )
                self._changed.wait(remaining)

    def wait_until(self, condition: Any, *, timeout: float = 60.0, what: str = "it") -> None:
        """Until `condition(self)` holds (checked whenever the bot calls the server)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"{what} did not happen within {timeout} s")
                self._changed.wait(remaining)

    # -- the Bot API's side --

    def error_body(self, error: HttpError) -> object:
        body: dict[str, Any] = {
            "ok": False,
            "error_code": error.status,
            "description": error.message,
        }
        if error.retry_after is not None:
            body["parameters"] = {"retry_after": int(error.retry_after)}
        return body

    def unknown_model(self, model: str) -> HttpError:
        return HttpError(404, "Not Found")

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        parts = [unquote(part) for part in request.path.strip("/").split("/")]
        with self._changed:
            self._changed.notify_all()  # a waiting test re-checks after every call
        if len(parts) >= 3 and parts[0] == "file":
            await self._file(parts[1].removeprefix("bot"), "/".join(parts[2:]), reply)
            return
        if len(parts) != 2 or not parts[0].startswith("bot"):
            await reply.json(404, self.error_body(HttpError(404, "Not Found")))
            return
        bot = self.bots.get(parts[0].removeprefix("bot"))
        if bot is None:
            await reply.json(401, self.error_body(HttpError(401, "Unauthorized")))
            return
        method, params = parts[1], _params(request)
        failure = self._scripted_failure(method)
        if failure is not None:
            await reply.json(failure.status, self.error_body(failure))
            return
        status, body = await self._call(bot, method, params)
        await reply.json(status, body)

    def _scripted_failure(self, method: str) -> HttpError | None:
        with self._lock:
            for index, (name, error) in enumerate(self._failures):
                if name == method:
                    del self._failures[index]
                    return error
        return None

    async def _call(self, bot: Bot, method: str, params: dict[str, Any]) -> tuple[int, object]:
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return 404, self.error_body(HttpError(404, "Not Found: method not found"))
        try:
            result = await handler(bot, params)
        except TelegramError as exc:
            return exc.error.status, self.error_body(exc.error)
        with self._changed:
            self._changed.notify_all()
        return 200, {"ok": True, "result": result}

    async def _file(self, token: str, path: str, reply: Reply) -> None:
        content = self.files.get(path.rsplit("/", 1)[-1]) if token in self.bots else None
        if content is None:
            await reply.json(404, self.error_body(HttpError(404, "Not Found")))
            return
        await reply.raw(200, content, "application/octet-stream")

    # Each `_m_<method>` is one Bot API method.

    async def _m_getMe(self, bot: Bot, params: dict[str, Any]) -> object:
        return _bot_user(bot) | {"can_join_groups": True, "supports_inline_queries": False}

    async def _m_getUpdates(self, bot: Bot, params: dict[str, Any]) -> object:
        if bot.webhook is not None:
            raise TelegramError(
                409, "Conflict: can't use getUpdates method while webhook is active"
            )
        offset = int(params.get("offset") or 0)
        timeout = min(float(params.get("timeout") or 0), MAX_POLL_S)
        limit = int(params.get("limit") or 100)
        deadline = time.monotonic() + timeout
        while True:
            arrived = asyncio.Event()  # registered before looking: no update slips between
            self._pollers.add(arrived)
            try:
                with self._lock:
                    if offset:
                        bot.confirmed = max(bot.confirmed, offset)
                    bot.updates = [u for u in bot.updates if u["update_id"] >= bot.confirmed]
                    pending = bot.updates[:limit]
                remaining = deadline - time.monotonic()
                if pending or remaining <= 0:
                    return pending
                await asyncio.wait_for(arrived.wait(), remaining)
            except TimeoutError:
                pass
            finally:
                self._pollers.discard(arrived)

    async def _m_setWebhook(self, bot: Bot, params: dict[str, Any]) -> object:
        with self._lock:
            bot.webhook = params
        return True

    async def _m_deleteWebhook(self, bot: Bot, params: dict[str, Any]) -> object:
        with self._lock:
            bot.webhook = None
        return True

    async def _m_getWebhookInfo(self, bot: Bot, params: dict[str, Any]) -> object:
        hook = bot.webhook or {}
        return {
            "url": hook.get("url", ""),
            "has_custom_certificate": False,
            "pending_update_count": 0,
        }

    async def _m_setMyCommands(self, bot: Bot, params: dict[str, Any]) -> object:
        with self._lock:
            bot.commands = _json(params.get("commands")) or []
        return True

    async def _m_sendChatAction(self, bot: Bot, params: dict[str, Any]) -> object:
        self._record(bot, "sendChatAction", params, text=str(params.get("action", "")))
        return True

    async def _m_sendMessage(self, bot: Bot, params: dict[str, Any]) -> object:
        text = str(params.get("text", ""))
        if not text:
            raise TelegramError(400, "Bad Request: message text is empty")
        if len(text) > MAX_MESSAGE_CHARS:
            raise TelegramError(400, "Bad Request: message is too long")
        sent = self._record(bot, "sendMessage", params, text=text)
        return _message(bot, sent)

    async def _m_editMessageText(self, bot: Bot, params: dict[str, Any]) -> object:
        sent = self._record(bot, "editMessageText", params, text=str(params.get("text", "")))
        return _message(bot, sent)

    async def _m_answerCallbackQuery(self, bot: Bot, params: dict[str, Any]) -> object:
        self._record(bot, "answerCallbackQuery", params, text=str(params.get("text", "")))
        return True

    async def _m_getFile(self, bot: Bot, params: dict[str, Any]) -> object:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise TelegramError(400, "Bad Request: invalid file_id")
        return {
            "file_id": file_id,
            "file_unique_id": file_id + "u",
            "file_size": len(self.files[file_id]),
            "file_path": f"photos/{file_id}",
        }

    def _record(self, bot: Bot, method: str, params: dict[str, Any], *, text: str) -> Sent:
        chat_id = int(params.get("chat_id") or 0)  # 0: a call about a button press
        sent = Sent(
            method=method,
            token=bot.token,
            chat_id=chat_id,
            text=text,
            parse_mode=params.get("parse_mode"),
            params=params,
            message_id=int(params.get("message_id") or next(self._message_ids)),
        )
        with self._changed:
            self._sent.append(sent)
            self._changed.notify_all()
        return sent


class TelegramError(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.error = HttpError(status, description)


def _params(request: RecordedRequest) -> dict[str, Any]:
    """A method's parameters: from the query string and a JSON or form body (where values
    that are objects arrive JSON-encoded, as `reply_markup` does)."""
    params: dict[str, Any] = dict(request.query)
    if isinstance(request.body, dict):
        params.update(request.body)
    return params


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _bot_user(bot: Bot) -> dict[str, Any]:
    return {"id": bot.id, "is_bot": True, "first_name": "Tally", "username": bot.username}


def _message(bot: Bot, sent: Sent) -> dict[str, Any]:
    return {
        "message_id": sent.message_id,
        "date": int(time.time()),
        "chat": {"id": sent.chat_id, "type": "private"},
        "from": _bot_user(bot),
        "text": sent.text,
    }
