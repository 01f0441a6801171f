"""What a message to a WeCom self-built app asks of the bot: nothing (not allowed, an event),
a command, or a turn, with the text and the pictures' media ids.

The message is WeCom's decrypted XML read into a dict (`xmlbody.py`); the fields the bot acts
on are then read strictly (ids bounded strings, times digits in range). Anything that does
not read is a `RefusedUpdate`. A self-built app receives only what people send it in their
private chat with it (WeCom delivers no group chat's messages to an app), so every message
is a private one, keyed by its person.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels_wecom import WeComSettings

Id = Annotated[str, Field(min_length=1, max_length=200)]  # kept in 200-character columns
Short = Annotated[str, Field(max_length=256)]
Digits = Annotated[str, Field(pattern=r"^[0-9]{1,20}$")]  # times, ids (MsgId is a uint64), agents


class _Fields(BaseModel):
    # strict: a nested element where text belongs is refused; other fields are kept as sent.
    model_config = ConfigDict(strict=True, extra="allow")

    ToUserName: Short = ""
    FromUserName: Id
    CreateTime: Digits
    MsgType: Short
    MsgId: Digits | None = None
    AgentID: Digits | None = None
    Content: Annotated[str, Field(max_length=65_536)] = ""
    MediaId: Short = ""
    Event: Short = ""


@dataclass(frozen=True, slots=True)
class AppMessage:
    """The parts of a message to the app a bot acts on."""

    message_id: str  # MsgId, or for an event one made of its sender, time and kind
    user_id: str
    msgtype: str
    text: str
    pictures: tuple[str, ...]  # media ids

    @property
    def user_key(self) -> str:
        """Whose memory the chat keeps (`memory.scope: user`)."""
        return f"wecom:{self.user_id}"


def message_id_of(data: dict[str, Any]) -> str | None:
    """The message's id when it has a readable one (a refused message is recorded under it)."""
    value = data.get("MsgId")
    return value if isinstance(value, str) and value.isdigit() and len(value) <= 20 else None


def parse(data: dict[str, Any]) -> AppMessage:
    """`data` as an AppMessage; RefusedUpdate when it is not one."""
    try:
        fields = _Fields.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"not a WeCom message: {where}: {first['msg']}") from exc
    if fields.MsgType == "event":
        message_id = f"event:{fields.FromUserName}:{fields.CreateTime}:{fields.Event}"
    elif fields.MsgId is None:
        raise RefusedUpdate("not a WeCom message: MsgId: missing")
    else:
        message_id = fields.MsgId
    pictures = (fields.MediaId,) if fields.MsgType == "image" and fields.MediaId else ()
    return AppMessage(
        message_id=message_id[:200],
        user_id=fields.FromUserName,
        msgtype=fields.MsgType,
        text=fields.Content.strip() if fields.MsgType == "text" else "",
        pictures=pictures,
    )


def read_message(message: AppMessage, settings: WeComSettings) -> Request:
    """What `message` asks, under the app's `allow_from` (WeCom user ids)."""
    if message.msgtype not in ("text", "image"):
        return None  # events (entering the app), voice, video, location: nothing to answer
    if not is_allowed((message.user_id,), settings.allow_from):
        return None
    if message.text.startswith("/"):
        word, _, argument = message.text[1:].partition(" ")
        return Command(word.casefold(), argument.strip())
    if not message.text and not message.pictures:
        return None
    return Ask(message.text)
