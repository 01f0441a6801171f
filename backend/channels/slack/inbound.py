"""What Slack delivers, read strictly: an `event_callback` (a message, an @mention) or a
`block_actions` payload (a button pressed), the same over Socket Mode and the Events API.
Ids are bounded strings, the text bounded, files a bounded list; anything else that does not
read is a `RefusedUpdate`. Then what a message asks of the bot: nothing (not allowed, a bot's
own message, an edit or a join, a channel message not addressed to it), a command, or a turn.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.channels.commands import DESCRIPTIONS, Ask, Command, Request, is_allowed
from backend.channels.platform_body import RefusedUpdate
from backend.settings.channels_slack import SlackSettings

Id = Annotated[str, Field(min_length=1, max_length=200)]  # kept in 200-character columns
Short = Annotated[str, Field(max_length=256)]
Url = Annotated[str, Field(max_length=2048)]
Text = Annotated[str, Field(max_length=65_536)]
# A message's own words; a message with a subtype not here (an edit, a join, a bot's) is not.
ANSWERED_SUBTYPES = frozenset({"", "file_share", "thread_broadcast"})
ACTION_PREFIX = "action:"  # a button press's platform id: `action:<trigger_id>`
COMMAND_PREFIX = "command:"  # a slash command's: `command:<trigger_id>`
SLASH = "slash_command"  # a slash command's `SlackMessage.event_type`: always addressed to us
KNOWN_COMMANDS = frozenset({*DESCRIPTIONS, "remember", "discard"})
OWNER_PREFIX = "for:"  # a question's block_id: `for:<user id>`, the one person who answers it


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class _File(_Strict):
    id: Short = ""
    name: Short = ""
    mimetype: Short = ""
    url_private: Url = ""
    url_private_download: Url = ""
    size: Annotated[int, Field(ge=0, le=2**53)] = 0


class _Event(_Strict):
    type: Short
    channel: Id = ""  # none for some events; one that is there is an id
    channel_type: Short = ""
    user: Short = ""
    bot_id: Short | None = None
    subtype: Short | None = None
    text: Text | None = ""
    ts: Short = ""
    thread_ts: Short | None = None
    files: Annotated[list[_File], Field(max_length=20)] = Field(default_factory=list)


class _Authorization(_Strict):
    user_id: Short = ""


class _Callback(_Strict):
    type: Literal["event_callback"]
    event_id: Id
    team_id: Short = ""
    event_time: Annotated[int, Field(ge=0, le=2**53)] = 0
    event: _Event
    authorizations: Annotated[list[_Authorization], Field(max_length=100)] = Field(
        default_factory=list
    )


class _Named(_Strict):
    id: Id


class _Action(_Strict):
    action_id: Short = ""
    block_id: Short = ""
    value: Annotated[str, Field(max_length=2000)] = ""


class _Shown(_Strict):
    ts: Short = ""
    text: Text = ""


class _Actions(_Strict):
    type: Literal["block_actions"]
    trigger_id: Id
    user: _Named
    channel: _Named
    message: _Shown = Field(default_factory=_Shown)
    actions: Annotated[list[_Action], Field(min_length=1, max_length=25)]


class _Slash(_Strict):
    """A slash command, as Slack sends it (a form over HTTP, an object in Socket Mode)."""

    command: Annotated[str, Field(pattern=r"^/[\w-]{1,32}$")]
    text: Text = ""
    user_id: Id
    channel_id: Id
    trigger_id: Id


@dataclass(frozen=True, slots=True)
class SlackFile:
    url: str
    mimetype: str


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """The parts of a message event a bot acts on."""

    event_id: str
    event_type: str  # "message" | "app_mention"
    channel: str
    is_private: bool  # a direct message (im)
    user: str
    is_from_a_bot: bool
    subtype: str
    text: str  # as Slack wrote it: mentions `<@U…>`, `&lt;` escapes
    ts: str
    thread_ts: str | None
    files: tuple[SlackFile, ...]
    bot_user: str  # the bot's own user id, when Slack said it

    @property
    def user_key(self) -> str:
        """Whose memory a direct message keeps (`memory.scope: user`)."""
        return f"slack:{self.user}"

    @property
    def reply_thread(self) -> str | None:
        """Where the reply goes: in a channel, the message's thread (started at it if it has
        none); in a direct message, the thread it came in, if any."""
        if self.is_private:
            return self.thread_ts
        return self.thread_ts or self.ts


@dataclass(frozen=True, slots=True)
class Press:
    """A button pressed under one of the bot's messages."""

    user: str
    channel: str
    message_ts: str
    message_text: str
    value: str
    owner: str  # the one person the question is for ("" for anyone allowed)

    @property
    def is_private(self) -> bool:
        return self.channel.startswith("D")


Update = SlackMessage | Press | None  # None: an event the bot does not act on


def platform_id_of(payload: object) -> str | None:
    """The update's id when it has a readable one (a refused update is recorded under it)."""
    if not isinstance(payload, dict):
        return None
    value = payload.get("event_id")
    if "command" in payload and "type" not in payload:
        trigger = payload.get("trigger_id")
        value = COMMAND_PREFIX + trigger if isinstance(trigger, str) else None
    if payload.get("type") == "block_actions":
        trigger = payload.get("trigger_id")
        value = ACTION_PREFIX + trigger if isinstance(trigger, str) else None
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def read_update(payload: dict[str, Any]) -> tuple[str, Update]:
    """(its platform id, what it is); RefusedUpdate when it is not a Slack event we know."""
    kind = payload.get("type")
    try:
        if kind == "event_callback":
            callback = _Callback.model_validate(payload)
            return callback.event_id, _message(callback)
        if kind == "block_actions":
            actions = _Actions.model_validate(payload)
            return ACTION_PREFIX + actions.trigger_id, _press(actions)
        if kind is None and "command" in payload:
            kind = "slash command"
            slash = _Slash.model_validate(payload)
            return COMMAND_PREFIX + slash.trigger_id, _slash_message(slash)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedUpdate(f"not a Slack {kind}: {where}: {first['msg']}") from exc
    raise RefusedUpdate(f"not a Slack event: type {str(kind)[:40]!r}")


def _message(callback: _Callback) -> SlackMessage | None:
    event = callback.event
    if event.type not in ("message", "app_mention") or not event.channel:
        return None
    bot_user = next((a.user_id for a in callback.authorizations if a.user_id), "")
    return SlackMessage(
        event_id=callback.event_id,
        event_type=event.type,
        channel=event.channel,
        is_private=event.channel_type == "im" or event.channel.startswith("D"),
        user=event.user,
        is_from_a_bot=event.bot_id is not None or event.subtype == "bot_message",
        subtype=event.subtype or "",
        text=event.text or "",
        ts=event.ts,
        thread_ts=event.thread_ts,
        files=tuple(
            SlackFile(f.url_private_download or f.url_private, f.mimetype)
            for f in event.files
            if f.mimetype.startswith("image/") and (f.url_private_download or f.url_private)
        ),
        bot_user=bot_user,
    )


def _slash_message(slash: _Slash) -> SlackMessage:
    """A slash command as a message saying it: `/forget 2`, or through one command of the
    app's own, `/tally forget 2`."""
    name, text = slash.command[1:].casefold(), slash.text.strip()
    said = f"/{name} {text}" if name in KNOWN_COMMANDS or not text else f"/{text}"
    return SlackMessage(
        event_id=COMMAND_PREFIX + slash.trigger_id,
        event_type=SLASH,
        channel=slash.channel_id,
        is_private=slash.channel_id.startswith("D"),
        user=slash.user_id,
        is_from_a_bot=False,
        subtype="",
        text=said,
        ts="",
        thread_ts=None,
        files=(),
        bot_user="",
    )


def _press(actions: _Actions) -> Press:
    action = actions.actions[0]
    owner = (
        action.block_id.removeprefix(OWNER_PREFIX)
        if action.block_id.startswith(OWNER_PREFIX)
        else ""
    )
    return Press(
        user=actions.user.id,
        channel=actions.channel.id,
        message_ts=actions.message.ts,
        message_text=actions.message.text,
        value=action.value,
        owner=owner,
    )


def read_message(message: SlackMessage, settings: SlackSettings, *, bot_user: str) -> Request:
    """What `message` asks, under the bot's `allow_from` and `group_policy`. In a channel,
    `mention` answers `app_mention` events and `all` answers every `message` event (an
    @mention comes as both: one of them is answered)."""
    bot_user = message.bot_user or bot_user
    if message.subtype not in ANSWERED_SUBTYPES or message.is_from_a_bot or not message.user:
        return None
    if message.user == bot_user or not is_allowed((message.user,), settings.allow_from):
        return None
    if message.event_type == SLASH:
        pass  # said to the bot, wherever it was typed
    elif message.is_private:
        if message.event_type != "message":
            return None
    elif message.event_type != ("app_mention" if settings.group_policy == "mention" else "message"):
        return None
    text = _without_mention(message.text, bot_user, leading=message.event_type == "app_mention")
    if text.startswith("/"):
        word, _, argument = text[1:].partition(" ")
        return Command(word.casefold(), argument.strip())
    if not text and not message.files:
        return None
    return Ask(text)


def _without_mention(text: str, bot_user: str, *, leading: bool) -> str:
    """The words without the bot's @mention, Slack's escapes undone. When Slack did not say
    who the bot is, an app_mention's first mention is taken for it."""
    if bot_user:
        text = re.sub(rf"<@{re.escape(bot_user)}(\|[^>]*)?>", "", text)
    elif leading:
        text = re.sub(r"^\s*<@[A-Z0-9]+(\|[^>]*)?>", "", text)
    return html.unescape(text).strip()
