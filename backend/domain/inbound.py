"""A message arriving for a turn, whatever carried it: the web page, the HTTP API, `/v1`, the
terminal, or a chat channel (Telegram, DingTalk). One type for every entry point."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.messages import UserInput

# The channels Tally serves itself: the web page, the HTTP API and `/v1`. Every other channel
# is a chat platform, one row of `channels/registry.py` (the one list of platforms, which this
# layer cannot import), and a session there is one platform chat.
ENTRY_POINTS = frozenset({"web", "api", "openai"})


def is_chat_platform(channel: str) -> bool:
    return channel not in ENTRY_POINTS


def origin_of(channel: str, external_key: str | None) -> str:
    """Where a session's words are said, as memory lines name it: `web`, `api`, `openai`, or
    the platform chat (`telegram:<bot>:<chat id>`, `dingtalk:<robot>:<conversation>`)."""
    if is_chat_platform(channel) and external_key:
        return f"{channel}:{external_key}"
    return channel


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent it on the platform: its id there, and the name it shows."""

    id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One message for a turn. The session is `session_id` when the client names ours; else
    the one a platform's chat maps to (`channel` + `external_key`, exactly); else a new one.

    `message_id` is the platform's id for the message: it is an idempotency key, so a
    message delivered twice is answered once.
    """

    tenant_id: str
    channel: str  # web, api, openai, telegram, dingtalk
    user_input: UserInput
    session_id: str | None = None
    external_key: str | None = None  # the chat on the platform, e.g. "<bot>:<chat id>"
    sender: Sender | None = None
    message_id: str | None = None
    idempotency_key: str | None = None
    user_key: str | None = None  # the end user whose memory this is (memory.scope: user)
    title: str = ""  # a new session's title
    is_group: bool = False
    is_mentioned: bool = False  # in a group: whether the bot was mentioned or replied to
    stream: bool = True  # whether someone watches tokens arrive
    # Whether someone can answer a tool call's `tool.approval` (a streaming client, a chat
    # with buttons); where nobody can, such a call is denied at once instead of waiting.
    can_approve: bool = False
