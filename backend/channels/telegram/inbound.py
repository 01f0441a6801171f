"""A Telegram update read into what it asks of the bot.

First the fields the bot acts on, strictly typed and bounded (`platform_body.py` has already
bounded the body, its depth and its numbers), then the SDK's own `Update`: anything that does
not read is a `RefusedUpdate`. Then what a message asks: nothing (not allowed, or a group chat
not talking to it), a command, or a turn, with the text the model should see.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from telegram import Bot, Chat, Message, MessageEntity, Update

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels import TelegramBotSettings

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


def read_message(
    message: Message, settings: TelegramBotSettings, *, bot_id: int, bot_username: str
) -> Request:
    """What `message` asks, under the bot's `allow_from` and `group_policy`."""
    sender = message.from_user
    names = () if sender is None else (str(sender.id), sender.username or "")
    if not is_allowed(names, settings.allow_from):
        return None
    text = message.text if message.text is not None else (message.caption or "")
    command = _command(message, text, bot_username)
    is_group = message.chat.type in (Chat.GROUP, Chat.SUPERGROUP)
    if is_group and settings.group_policy == "mention":
        if command is None and not _is_addressed(message, bot_id=bot_id, username=bot_username):
            return None
    if command is not None:
        return command
    cleaned = _without_mention(text, bot_username).strip()
    if not cleaned and not message.photo:
        return None
    return Ask(cleaned)


def _command(message: Message, text: str, bot_username: str) -> Command | None:
    """A `/command[@bot] argument` at the start of the message, meant for this bot."""
    entities = message.entities if message.text is not None else message.caption_entities
    first = next((e for e in entities if e.offset == 0), None)
    if first is None or first.type != MessageEntity.BOT_COMMAND:
        return None
    word = text[1 : first.length]
    name, _, addressee = word.partition("@")
    if addressee and addressee.casefold() != bot_username.casefold():
        return None  # another bot's command in a group
    return Command(name.casefold(), text[first.length :].strip())


def _is_addressed(message: Message, *, bot_id: int, username: str) -> bool:
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == bot_id:
        return True
    entities = message.parse_entities() if message.text else message.parse_caption_entities()
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value.casefold() == f"@{username}".casefold():
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            return True
    return False


def _without_mention(text: str, username: str) -> str:
    mention = f"@{username}"
    start = text.casefold().find(mention.casefold())
    if start < 0:
        return text
    return text[:start] + text[start + len(mention) :]
