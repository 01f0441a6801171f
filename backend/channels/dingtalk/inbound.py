"""What a DingTalk robot message asks of the bot: nothing (not allowed, or a group message not
addressed to it), a command, or a turn, with the text and the pictures' download codes. The
message is read by the SDK's own parser (`ChatbotMessage`), Stream frame or callback alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dingtalk_stream import ChatbotMessage

from backend.channel_settings import DingTalkRobotSettings
from backend.channels.commands import Ask, Command, Request, is_allowed

PRIVATE = "1"  # conversationType; "2" is a group


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
    """`data` as a RobotMessage; ValueError when it is not one (no message id or conversation)."""
    try:
        message = ChatbotMessage.from_dict(data)
        texts = message.get_text_list() or []
        pictures = message.get_image_list() or []
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a robot message: {exc!r}") from exc
    if not isinstance(message.message_id, str) or not isinstance(message.conversation_id, str):
        raise ValueError("a robot message needs msgId and conversationId")
    return RobotMessage(
        message_id=message.message_id,
        conversation_id=message.conversation_id,
        is_group=message.conversation_type != PRIVATE,
        is_mentioned=bool(message.is_in_at_list),
        sender_id=str(message.sender_id or ""),
        sender_staff_id=str(message.sender_staff_id or ""),
        sender_nick=str(message.sender_nick or ""),
        text="\n".join(str(text) for text in texts if text).strip(),
        pictures=tuple(str(code) for code in pictures if code),
        session_webhook=str(message.session_webhook or ""),
        session_webhook_expires_ms=int(message.session_webhook_expired_time or 0),
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
