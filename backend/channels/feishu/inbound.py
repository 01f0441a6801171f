"""What a Feishu event asks of the bot. An event (schema 2.0, the same body over the long
connection and over HTTP) is a message received (`im.message.receive_v1`), a card's button
pressed (`card.action.trigger`), or anything else, kept and ignored.

The fields the bot acts on are read strictly (ids are bounded strings, the message's content a
JSON string of the shape its type says: `platform_body.py` has already bounded the body);
anything that does not read is a `RefusedUpdate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.channels.commands import Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate, read_body
from backend.settings.channels_feishu import FeishuSettings

MESSAGE_RECEIVED = "im.message.receive_v1"
CARD_PRESSED = "card.action.trigger"
PRIVATE = "p2p"  # chat_type; "group" (and "topic_group") are groups
Id = Annotated[str, Field(min_length=1, max_length=200)]  # kept in 200-character columns
Short = Annotated[str, Field(max_length=256)]
M = TypeVar("M", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class _Header(_Strict):
    event_id: Id
    event_type: Short
    token: Short = ""


class _Event(_Strict):
    schema_: Literal["2.0"] = Field(alias="schema")
    header: _Header
    event: dict[str, Any] = Field(default_factory=dict)


class _UserId(_Strict):
    open_id: Short = ""
    user_id: Short | None = ""
    union_id: Short | None = ""


class _Sender(_Strict):
    sender_id: _UserId
    sender_type: Short = "user"


class _Mention(_Strict):
    key: Short
    id: _UserId
    name: Short = ""


class _Message(_Strict):
    message_id: Id
    chat_id: Id
    chat_type: Short
    message_type: Short
    content: Annotated[str, Field(max_length=200_000)]
    mentions: list[_Mention] = Field(default_factory=list, max_length=100)


class _Received(_Strict):
    sender: _Sender
    message: _Message


class _Action(_Strict):
    value: dict[str, Any] = Field(default_factory=dict)


class _Context(_Strict):
    open_message_id: Id
    open_chat_id: Id


class _Pressed(_Strict):
    operator: _UserId
    action: _Action
    context: _Context


@dataclass(frozen=True, slots=True)
class FeishuMessage:
    """The parts of a received message a bot acts on."""

    message_id: str
    chat_id: str
    is_group: bool
    sender_open_id: str
    sender_user_id: str
    text: str  # mentions as Feishu writes them: "@_user_1"
    mentions: tuple[tuple[str, str, str], ...]  # (key in the text, open id, name)
    images: tuple[str, ...]  # image keys

    @property
    def user_key(self) -> str:
        """Whose memory a private chat keeps (`memory.scope: user`)."""
        return f"feishu:{self.sender_open_id}"


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """A card's button pressed: what it says (`Choice.data`), by whom, on which message."""

    event_id: str
    message_id: str
    chat_id: str
    operator_open_id: str
    operator_user_id: str
    data: str
    owner: str  # the open id the button was shown for
    is_private: bool


@dataclass(frozen=True, slots=True)
class OtherEvent:
    event_type: str


Event = FeishuMessage | ButtonPress | OtherEvent


def event_id_of(data: object) -> str | None:
    """The event's id when it has a readable one (a refused event is recorded under it)."""
    header = data.get("header") if isinstance(data, dict) else None
    value = header.get("event_id") if isinstance(header, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def header_token(data: dict[str, Any]) -> str:
    header = data.get("header")
    token = header.get("token") if isinstance(header, dict) else None
    return token if isinstance(token, str) else ""


def parse(data: dict[str, Any]) -> Event:
    """`data` as the event the bot acts on; RefusedUpdate when it does not read."""
    event = _validated(_Event, data, "not a Feishu event")
    kind = event.header.event_type
    if kind == MESSAGE_RECEIVED:
        return _message(_validated(_Received, event.event, "not a message event"))
    if kind == CARD_PRESSED:
        return _press(event.header.event_id, _validated(_Pressed, event.event, "not a card action"))
    return OtherEvent(kind)


def _validated(model: type[M], data: Any, what: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"{what}: {where}: {first['msg']}") from exc


def _message(received: _Received) -> FeishuMessage:
    message = received.message
    try:  # a JSON string in the event: read with the same limits, made storable
        content = read_body(message.content.encode("utf-8", "surrogatepass"))
    except RefusedUpdate as exc:
        raise RefusedUpdate(f"message.content: {exc.reason}") from exc
    texts, images = _content(message.message_type, content)
    sender = received.sender.sender_id
    return FeishuMessage(
        message_id=message.message_id,
        chat_id=message.chat_id,
        is_group=message.chat_type != PRIVATE,
        sender_open_id=sender.open_id,
        sender_user_id=sender.user_id or "",
        text=" ".join(texts),
        mentions=tuple((m.key, m.id.open_id, m.name) for m in message.mentions),
        images=tuple(images),
    )


def _content(message_type: str, content: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The texts and image keys of a message's content, by its type; others say nothing."""
    if message_type == "text":
        return [_string(content.get("text"), "text")], []
    if message_type == "image":
        return [], [_string(content.get("image_key"), "image_key")]
    if message_type != "post":
        return [], []
    texts: list[str] = []
    images: list[str] = []
    title = content.get("title")
    if isinstance(title, str) and title:
        texts.append(title)
    paragraphs = content.get("content")
    if not isinstance(paragraphs, list):
        raise RefusedUpdate("a post's content is not a list of paragraphs")
    for paragraph in paragraphs:
        if not isinstance(paragraph, list):
            raise RefusedUpdate("a post's paragraph is not a list")
        line = []
        for element in paragraph:
            if not isinstance(element, dict):
                raise RefusedUpdate("a post's element is not an object")
            tag = element.get("tag")
            if tag in ("text", "a", "md"):
                line.append(_string(element.get("text", ""), "text"))
            elif tag == "at":
                line.append(_string(element.get("user_id", ""), "user_id"))
            elif tag == "img":
                images.append(_string(element.get("image_key"), "image_key"))
        texts.append("".join(line))
    return ["\n".join(texts)], images


def _string(value: object, name: str) -> str:
    if not isinstance(value, str) or len(value) > 100_000:
        raise RefusedUpdate(f"message.content.{name} is not a string")
    return value


def _press(event_id: str, pressed: _Pressed) -> ButtonPress:
    value = pressed.action.value
    return ButtonPress(
        event_id=event_id,
        message_id=pressed.context.open_message_id,
        chat_id=pressed.context.open_chat_id,
        operator_open_id=pressed.operator.open_id,
        operator_user_id=pressed.operator.user_id or "",
        data=str(value.get("data", ""))[:500],
        owner=str(value.get("owner", "")),
        is_private=value.get("private") is True,
    )


def read_message(message: FeishuMessage, settings: FeishuSettings, bot_open_id: str) -> Request:
    """What `message` asks, under the bot's `allow_from` and `group_policy`; the bot's own
    mention taken out of the text, others' shown by name."""
    if not is_allowed((message.sender_open_id, message.sender_user_id), settings.allow_from):
        return None
    mentioned = False
    text = message.text
    for key, open_id, name in message.mentions:
        is_bot = bool(bot_open_id) and open_id == bot_open_id
        mentioned = mentioned or is_bot
        text = text.replace(key, "" if is_bot else f"@{name or open_id}")
    if message.is_group and settings.group_policy == "mention" and not mentioned:
        return None
    text = text.strip()
    if text.startswith("/"):
        word, _, argument = text[1:].partition(" ")
        return Command(word.casefold(), argument.strip())
    if not text and not message.images:
        return None
    return Ask(text)
