"""What a QQ event asks of the bot: nothing (not allowed), a command, or a turn (its text and the
URLs of its pictures).

A kept update is QQ's event as delivered (webhook body or gateway dispatch alike):
`{"op": 0, "id": <event id>, "t": <type>, "s"?: <seq>, "d": <message>}`. Two types carry
messages: GROUP_AT_MESSAGE_CREATE (a group message that @-mentions the bot: QQ delivers no
other group message to a bot) and C2C_MESSAGE_CREATE (a private message). The fields acted on
are read strictly (bounded ids and strings, `extra="allow"`); anything else is a `RefusedUpdate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels_qq import QQSettings

GROUP = "GROUP_AT_MESSAGE_CREATE"
PRIVATE = "C2C_MESSAGE_CREATE"
DISPATCH = 0
Id = Annotated[str, Field(min_length=1, max_length=200)]  # kept in 200-character columns
Short = Annotated[str, Field(max_length=256)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class _Author(_Strict):
    id: Short = ""
    member_openid: Short = ""  # in a group
    user_openid: Short = ""  # in a private chat
    username: Short = ""


class _Attachment(_Strict):
    content_type: Short = ""
    url: Annotated[str, Field(max_length=2048)] = ""


class _Message(_Strict):
    id: Id
    content: Annotated[str, Field(max_length=65_536)] = ""
    timestamp: Short = ""
    group_openid: Short = ""
    author: _Author
    attachments: Annotated[list[_Attachment], Field(max_length=20)] = []


class _Event(_Strict):
    op: int
    t: Annotated[str, Field(max_length=64)]
    id: Short = ""
    d: _Message


@dataclass(frozen=True, slots=True)
class QQMessage:
    """The parts of a QQ message a bot acts on."""

    message_id: str  # QQ's msg_id: a passive reply names it
    event_id: str
    is_group: bool
    chat_id: str  # the group's openid, or the person's
    sender_openid: str  # member_openid in a group, user_openid in a private chat
    text: str
    pictures: tuple[str, ...] = ()  # the URLs of its image attachments

    @property
    def user_key(self) -> str:
        """Whose memory a private chat keeps (`memory.scope: user`)."""
        return f"qq:{self.sender_openid}"


def message_id_of(data: dict[str, Any]) -> str | None:
    """The message's id when it has a readable one (a refused event is recorded under it)."""
    inner = data.get("d")
    value = inner.get("id") if isinstance(inner, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def other_event_id(data: dict[str, Any]) -> str | None:
    """The id of a dispatch that carries no message to answer (a bot added to a group, a
    friend added...): kept and ignored. None for a message event, or what is no event."""
    kind, event_id = data.get("t"), data.get("id")
    if data.get("op") != DISPATCH or not isinstance(kind, str) or kind in (GROUP, PRIVATE):
        return None
    if not isinstance(event_id, str) or not 0 < len(event_id) <= 200 or len(kind) > 64:
        return None
    return event_id


def parse(data: dict[str, Any]) -> QQMessage:
    """`data` as a QQMessage; RefusedUpdate when it is not one."""
    if data.get("op") != DISPATCH:
        raise RefusedUpdate(f"not a dispatch: op {data.get('op')!r}")
    if data.get("t") not in (GROUP, PRIVATE):
        raise RefusedUpdate(f"not a message event: {str(data.get('t'))[:64]}")
    try:
        event = _Event.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"not a QQ message: {where}: {first['msg']}") from exc
    message, is_group = event.d, event.t == GROUP
    sender = message.author.member_openid if is_group else message.author.user_openid
    chat = message.group_openid if is_group else sender
    if not chat or not sender:
        what = "d.group_openid" if is_group else "d.author.user_openid"
        raise RefusedUpdate(f"not a QQ message: {what} is missing")
    return QQMessage(
        message_id=message.id,
        event_id=event.id,
        is_group=is_group,
        chat_id=chat,
        sender_openid=sender,
        text=message.content.strip(),
        pictures=tuple(
            a.url for a in message.attachments if a.content_type.startswith("image/") and a.url
        ),
    )


def read_message(message: QQMessage, settings: QQSettings) -> Request:
    """What `message` asks, under the bot's `allow_from`. QQ cuts the bot's @-mention out of
    a group message itself, and delivers no group message that does not @-mention it."""
    if not is_allowed((message.sender_openid,), settings.allow_from):
        return None
    if message.text.startswith("/"):
        word, _, argument = message.text[1:].partition(" ")
        return Command(word.casefold(), argument.strip())
    if not message.text and not message.pictures:
        return None
    return Ask(message.text)
