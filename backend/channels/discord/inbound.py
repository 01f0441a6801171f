"""What a Discord gateway dispatch asks of the bot. A kept update is `{"t": <event>, "d":
<data>}` as the gateway sent it: a MESSAGE_CREATE (a message in a server's channel or a direct
message) or an INTERACTION_CREATE (a button pressed). The fields the bot acts on are read
strictly (ids are snowflakes, strings bounded; `platform_body.py` has already bounded the
whole); anything else is a `RefusedUpdate`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels_discord import DiscordSettings

MESSAGE = "MESSAGE_CREATE"
INTERACTION = "INTERACTION_CREATE"
EVENTS = (MESSAGE, INTERACTION)
ANSWERED_TYPES = (0, 19)  # a message, a reply; not joins, pins, boosts
COMPONENT = 3  # an interaction's type when a button was pressed
Snowflake = Annotated[str, Field(pattern=r"^[0-9]{1,20}$")]
Short = Annotated[str, Field(max_length=256)]
Url = Annotated[str, Field(max_length=2048)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class _User(_Strict):
    id: Snowflake
    username: Short = ""
    global_name: Short | None = None
    bot: bool = False


class _Attachment(_Strict):
    id: Snowflake
    url: Url
    filename: Short = ""
    content_type: Short | None = None


class _Message(_Strict):
    id: Snowflake
    channel_id: Snowflake
    guild_id: Snowflake | None = None
    author: _User
    content: Annotated[str, Field(max_length=8_000)] = ""
    type: Annotated[int, Field(ge=0, le=1_000)] = 0
    mentions: Annotated[list[_User], Field(max_length=200)] = []
    attachments: Annotated[list[_Attachment], Field(max_length=20)] = []


class _Member(_Strict):
    user: _User


class _ComponentData(_Strict):
    custom_id: Annotated[str, Field(max_length=100)] = ""


class _PressedMessage(_Strict):
    id: Snowflake
    content: Annotated[str, Field(max_length=8_000)] = ""


class _Interaction(_Strict):
    id: Snowflake
    token: Annotated[str, Field(min_length=1, max_length=1_000)]
    type: Annotated[int, Field(ge=0, le=1_000)]
    channel_id: Snowflake | None = None
    guild_id: Snowflake | None = None
    member: _Member | None = None
    user: _User | None = None
    data: _ComponentData | None = None
    message: _PressedMessage | None = None


@dataclass(frozen=True, slots=True)
class DiscordMessage:
    message_id: str
    channel_id: str
    guild_id: str | None
    author_id: str
    author_name: str
    author_is_bot: bool
    message_type: int
    text: str
    mentions: tuple[str, ...]  # user ids
    pictures: tuple[tuple[str, str], ...]  # (url, content type) of the image attachments

    @property
    def is_group(self) -> bool:
        return self.guild_id is not None

    @property
    def user_key(self) -> str:
        """Whose memory a direct message keeps (`memory.scope: user`)."""
        return user_key(self.author_id)


@dataclass(frozen=True, slots=True)
class Press:
    """A button pressed under one of the bot's messages."""

    interaction_id: str
    token: str
    channel_id: str
    guild_id: str | None
    user_id: str
    custom_id: str
    message_text: str


def user_key(user_id: str) -> str:
    return f"discord:{user_id}"


def update_id_of(payload: object) -> str | None:
    """The dispatch's id when it has a readable one (a refused update is recorded under it)."""
    data = payload.get("d") if isinstance(payload, dict) else None
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str) and re.fullmatch(r"[0-9]{1,20}", value) else None


def parse(payload: dict[str, Any]) -> DiscordMessage | Press | None:
    """The message or press `payload` carries (None: an interaction that is no press);
    RefusedUpdate when it does not read."""
    event, data = payload.get("t"), payload.get("d")
    if event not in EVENTS or not isinstance(data, dict):
        raise RefusedUpdate(f"not a Discord message or interaction: {str(event)[:40]}")
    try:
        if event == MESSAGE:
            return _message(_Message.model_validate(data))
        return _press(_Interaction.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"not a Discord {event}: {where}: {first['msg']}") from exc


def _message(fields: _Message) -> DiscordMessage:
    return DiscordMessage(
        message_id=fields.id,
        channel_id=fields.channel_id,
        guild_id=fields.guild_id,
        author_id=fields.author.id,
        author_name=fields.author.global_name or fields.author.username,
        author_is_bot=fields.author.bot,
        message_type=fields.type,
        text=fields.content,
        mentions=tuple(user.id for user in fields.mentions),
        pictures=tuple(
            (a.url, a.content_type or "")
            for a in fields.attachments
            if (a.content_type or "").startswith("image/")
        ),
    )


def _press(fields: _Interaction) -> Press | None:
    user = fields.member.user if fields.member is not None else fields.user
    if fields.type != COMPONENT or fields.data is None or user is None or not fields.channel_id:
        return None
    return Press(
        interaction_id=fields.id,
        token=fields.token,
        channel_id=fields.channel_id,
        guild_id=fields.guild_id,
        user_id=user.id,
        custom_id=fields.data.custom_id,
        message_text=fields.message.content if fields.message is not None else "",
    )


def read_message(message: DiscordMessage, settings: DiscordSettings, *, bot_id: str) -> Request:
    """What `message` asks, under the bot's `allow_from` and `group_policy`: in a server's
    channel it is for the bot when it mentions the bot (Discord lists a replied-to author among
    the mentions too), or always under `group_policy: all`."""
    if message.author_is_bot or message.author_id == bot_id:
        return None  # its own replies, and other bots: never a loop
    if message.message_type not in ANSWERED_TYPES:
        return None
    if not is_allowed((message.author_id,), settings.allow_from):
        return None
    if message.is_group and settings.group_policy == "mention" and bot_id not in message.mentions:
        return None
    text = re.sub(rf"<@!?{bot_id}>", " ", message.text).strip()
    if text.startswith("/"):
        word, _, argument = text[1:].partition(" ")
        return Command(word.casefold(), argument.strip())
    if not text and not message.pictures:
        return None
    return Ask(text)
