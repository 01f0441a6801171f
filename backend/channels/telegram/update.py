"""A Telegram update read into typed values: the fields the bot acts on, strictly typed and
bounded (`platform_body.py` has already bounded the body, its depth and its numbers), then
the SDK's own `Update`. Anything that does not read is a `RefusedUpdate`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from telegram import Bot, Update

from backend.channels.platform_body import RefusedUpdate

TELEGRAM_ID_LIMIT = 2**53  # Telegram's ids fit in 52 bits (its own documentation)
TelegramId = Annotated[int, Field(ge=-TELEGRAM_ID_LIMIT, le=TELEGRAM_ID_LIMIT)]
Count = Annotated[int, Field(ge=0, le=TELEGRAM_ID_LIMIT)]
Short = Annotated[str, Field(max_length=256)]  # names, types, file ids, callback data
Long = Annotated[str, Field(max_length=65_536)]  # text and captions (Telegram allows 4,096)


class _Strict(BaseModel):
    # strict: "12" is no id and "yes" no boolean; other fields pass on to the SDK.
    model_config = ConfigDict(strict=True, extra="allow")


class _User(_Strict):
    id: TelegramId
    username: Short | None = None


class _Chat(_Strict):
    id: TelegramId
    type: Literal["private", "group", "supergroup", "channel"]


class _Entity(_Strict):
    type: Short
    offset: Count
    length: Count
    user: _User | None = None


class _Photo(_Strict):
    file_id: Short


class _Message(_Strict):
    message_id: TelegramId
    date: Count
    chat: _Chat
    from_user: _User | None = Field(None, alias="from")
    text: Long | None = None
    caption: Long | None = None
    entities: list[_Entity] = []
    caption_entities: list[_Entity] = []
    photo: list[_Photo] = []
    reply_to_message: _Message | None = None


class _CallbackQuery(_Strict):
    id: Short
    from_user: _User = Field(alias="from")
    data: Short | None = None


class _Update(_Strict):
    update_id: Count
    message: _Message | None = None
    callback_query: _CallbackQuery | None = None


class PollingBot(Bot):
    """The SDK's Bot, whose `getUpdates` answer is taken raw: each update is then read, or
    refused, on its own, so one that does not read never stops the polling (the SDK's own
    `get_updates` fails the whole batch, and would fail it again at every poll)."""

    async def raw_updates(
        self, *, offset: int | None, wait_s: int, allowed_updates: Sequence[str]
    ) -> list[object]:
        request_timeout = self._request[0].read_timeout or 0
        result = await self._post(
            "getUpdates",
            {"offset": offset, "timeout": wait_s, "allowed_updates": list(allowed_updates)},
            read_timeout=request_timeout + wait_s,
        )
        return list(result) if isinstance(result, list) else []


def update_id_of(payload: object) -> int | None:
    """The update's id when it has a readable one (a refused update is recorded under it)."""
    value = payload.get("update_id") if isinstance(payload, dict) else None
    return value if type(value) is int and 0 <= value <= TELEGRAM_ID_LIMIT else None


def read_update(payload: dict[str, Any], bot: Bot) -> Update:
    """`payload` as the SDK's Update, once the fields the bot reads are what they should be."""
    try:
        _Update.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"not a Telegram update: {where}: {first['msg']}") from exc
    try:
        return Update.de_json(payload, bot)
    except Exception as exc:  # the SDK's reading of the rest; whatever it raises, unreadable
        raise RefusedUpdate(f"not a Telegram update: {type(exc).__name__}") from exc
