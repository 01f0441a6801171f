"""What a DingTalk robot message asks of the bot: nothing (not allowed, or a group message not
addressed to it), a command, or a turn, with the text and the pictures' download codes.

The fields the bot acts on are read strictly first (ids are bounded strings, times integers in
range, the mention a boolean: `platform_body.py` has already bounded the body), then by the
SDK's own parser (`ChatbotMessage`), Stream frame or callback alike. Anything that does not
read is a `RefusedUpdate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from dingtalk_stream import ChatbotMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels import DingTalkRobotSettings

PRIVATE = "1"  # conversationType; "2" is a group
MILLISECONDS_LIMIT = 2**53  # DingTalk's times are milliseconds since 1970
Id = Annotated[str, Field(min_length=1, max_length=200)]  # kept in 200-character columns
Short = Annotated[str, Field(max_length=256)]
Milliseconds = Annotated[int, Field(ge=0, le=MILLISECONDS_LIMIT)]


class _Strict(BaseModel):
    # strict: "yes" is no boolean and "1e400" no time; other fields pass on to the SDK.
    model_config = ConfigDict(strict=True, extra="allow")


class _Text(_Strict):
    content: Annotated[str, Field(max_length=65_536)] = ""


class _Fields(_Strict):
    msgId: Id
    conversationId: Id
    conversationType: Short = ""  # none said: a group's rules, the stricter
    isInAtList: bool = False
    senderId: Short = ""
    senderStaffId: Short = ""
    senderNick: Short = ""
    msgtype: Short = "text"
    text: _Text | None = None
    content: dict[str, Any] | None = None
    sessionWebhook: Annotated[str, Field(max_length=2048)] = ""
    sessionWebhookExpiredTime: Milliseconds = 0
    createAt: Milliseconds = 0


def message_id_of(data: dict[str, Any]) -> str | None:
    """The message's id when it has a readable one (a refused message is recorded under it)."""
    value = data.get("msgId")
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


@dataclass(frozen=True, slots=True)
class RobotMessage:
    """The parts of a robot message a bot acts on."""

    message_id: str
    conversation_id: str
    is_group: bool
    is_mentioned: bool
    sender_id: str
    sender_staff_id: str
    sender_nick: str
    text: str
    pictures: tuple[str, ...]  # download codes
    session_webhook: str
    session_webhook_expires_ms: int

    @property
    def user_key(self) -> str:
        """Whose memory a private chat keeps (`memory.scope: user`)."""
        return f"dingtalk:{self.sender_staff_id or self.sender_id}"


def parse(data: dict[str, Any]) -> RobotMessage:
    """`data` as a RobotMessage; RefusedUpdate when it is not one."""
    try:
        fields = _Fields.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"not a robot message: {where}: {first['msg']}") from exc
    try:
        message = ChatbotMessage.from_dict(data)
        texts = message.get_text_list() or []
        pictures = message.get_image_list() or []
    except Exception as exc:  # the SDK's reading of the rest; whatever it raises, unreadable
        raise RefusedUpdate(f"not a robot message: {type(exc).__name__}") from exc
    return RobotMessage(
        message_id=fields.msgId,
        conversation_id=fields.conversationId,
        is_group=fields.conversationType != PRIVATE,
        is_mentioned=fields.isInAtList,
        sender_id=fields.senderId,
        sender_staff_id=fields.senderStaffId,
        sender_nick=fields.senderNick,
        text="\n".join(text for text in texts if isinstance(text, str) and text).strip(),
        pictures=tuple(code for code in pictures if isinstance(code, str) and code),
        session_webhook=fields.sessionWebhook,
        session_webhook_expires_ms=fields.sessionWebhookExpiredTime,
    )


def read_message(message: RobotMessage, settings: DingTalkRobotSettings) -> Request:
    """What `message` asks, under the robot's `allow_from` and `group_policy`. DingTalk takes the
    robot's @mention out of the text itself; a group message is for us when it was in it."""
    if not is_allowed((message.sender_staff_id, message.sender_id), settings.allow_from):
        return None
    if message.is_group and settings.group_policy == "mention" and not message.is_mentioned:
        return None
    if message.text.startswith("/"):
        word, _, argument = message.text[1:].partition(" ")
        return Command(word.casefold(), argument.strip())
    if not message.text and not message.pictures:
        return None
    return Ask(message.text)
