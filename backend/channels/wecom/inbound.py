"""What a message to a WeCom bot asks of it: nothing (not allowed, an event, a group message
not for it), a command, or a turn, with the text and the pictures' media ids.

A self-built app's message is WeCom's decrypted XML read into a dict (`xmlbody.py`); an
intelligent robot's is a JSON frame. The fields the bot acts on are read strictly (ids bounded
strings, times digits in range); anything that does not read is a `RefusedUpdate`. A
self-built app receives only what people send it in their private chat with it (WeCom
delivers no group chat's messages to an app), so each of its messages is a private one, keyed
by its person; a robot is in private chats and in groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels_wecom import WeComSettings

Id = Annotated[str, Field(min_length=1, max_length=200)]  # kept in 200-character columns
Short = Annotated[str, Field(max_length=256)]
MENTION = re.compile(r"^\s*(@\S+\s*)+")
Digits = Annotated[str, Field(pattern=r"^[0-9]{1,20}$")]  # times, ids (MsgId is a uint64), agents


class _Strict(BaseModel):
    # strict: a nested element where text belongs is refused; other fields are kept as sent.
    model_config = ConfigDict(strict=True, extra="allow")


class _Fields(_Strict):
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
class WeComMessage:
    """The parts of a message to the app or the robot a bot acts on."""

    message_id: str  # MsgId (msgid), or for an app's event one made of who, when and what
    user_id: str
    msgtype: str
    text: str
    pictures: tuple[str, ...] = ()  # media ids
    chat_id: str = ""  # a robot's group chat
    frame: dict[str, Any] | None = None  # a robot's message as received: its reply answers it
    press: str = ""  # a robot's template card button pressed: the choice's data
    task_id: str = ""  # and the card's task id

    @property
    def is_group(self) -> bool:
        return bool(self.chat_id)

    @property
    def user_key(self) -> str:
        """Whose memory the chat keeps (`memory.scope: user`)."""
        return f"wecom:{self.user_id}"


def message_id_of(data: dict[str, Any]) -> str | None:
    """The message's id when it has a readable one (a refused message is recorded under it)."""
    value = data.get("MsgId")
    return value if isinstance(value, str) and value.isdigit() and len(value) <= 20 else None


def parse(data: dict[str, Any]) -> WeComMessage:
    """`data` as an WeComMessage; RefusedUpdate when it is not one."""
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
    return WeComMessage(
        message_id=message_id[:200],
        user_id=fields.FromUserName,
        msgtype=fields.MsgType,
        text=fields.Content.strip() if fields.MsgType == "text" else "",
        pictures=pictures,
    )


class _RobotText(_Strict):
    content: Annotated[str, Field(max_length=65_536)] = ""


class _RobotFrom(_Strict):
    userid: Id


class _CardEvent(_Strict):
    event_key: Annotated[str, Field(max_length=1024)] = ""
    task_id: Annotated[str, Field(max_length=128)] = ""


class _RobotEvent(_Strict):
    eventtype: Short = ""
    template_card_event: _CardEvent | None = None


class _RobotBody(_Strict):
    msgid: Id
    chattype: Literal["single", "group"] = "single"
    chatid: Short = ""
    msgtype: Short
    text: _RobotText | None = None
    sender: _RobotFrom = Field(alias="from")
    event: _RobotEvent | None = None


class _RobotFrame(_Strict):
    cmd: Short
    body: _RobotBody


def robot_message_id_of(frame: dict[str, Any]) -> str | None:
    body = frame.get("body")
    value = body.get("msgid") if isinstance(body, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def parse_robot(frame: dict[str, Any]) -> WeComMessage:
    """A robot's message frame as a WeComMessage; RefusedUpdate when it is not one."""
    try:
        fields = _RobotFrame.model_validate(frame)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"not a WeCom robot message: {where}: {first['msg']}") from exc
    body = fields.body
    if body.chattype == "group" and not body.chatid:
        raise RefusedUpdate("not a WeCom robot message: a group message without its chatid")
    text = body.text.content if body.text is not None and body.msgtype == "text" else ""
    if body.chattype == "group":  # WeCom leaves the robot's @name in the text
        text = MENTION.sub("", text)
    card = body.event.template_card_event if body.event is not None else None
    return WeComMessage(
        message_id=body.msgid,
        user_id=body.sender.userid,
        msgtype=body.msgtype if fields.cmd == "aibot_msg_callback" else "event",
        text=text.strip(),
        chat_id=body.chatid if body.chattype == "group" else "",
        frame=frame,
        press=card.event_key if card is not None else "",
        task_id=card.task_id if card is not None else "",
    )


def read_message(message: WeComMessage, settings: WeComSettings) -> Request:
    """What `message` asks, under the bot's `allow_from` (WeCom user ids). In a group, WeCom
    gives a robot only the messages that @mention it, so `group_policy` changes nothing."""
    if message.msgtype not in ("text", "image"):
        return None  # events (entering the chat), voice, video, location: nothing to answer
    if not is_allowed((message.user_id,), settings.allow_from):
        return None
    if message.text.startswith("/"):
        word, _, argument = message.text[1:].partition(" ")
        return Command(word.casefold(), argument.strip())
    if not message.text and not message.pictures:
        return None
    return Ask(message.text)
