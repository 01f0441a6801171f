"""What a Telegram message asks of the bot: nothing (not allowed, or a group chat not talking
to it), a command, or a turn, with the text the model should see."""

from __future__ import annotations

from telegram import Chat, Message, MessageEntity

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.settings.channels import TelegramBotSettings


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
