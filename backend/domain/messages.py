"""Stored messages and the content parts a user message may carry.

Only user messages and final assistant replies are stored as messages; tool calls live in
`tool_conversations`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Role = Literal["user", "assistant"]
MessageStatus = Literal["complete", "incomplete"]


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An inline image: `data` is base64, `media_type` like `image/png`."""

    media_type: str
    data: str
    type: Literal["image"] = "image"


ContentPart = TextPart | ImagePart


@dataclass(frozen=True, slots=True)
class UserInput:
    """What a user sent in one turn: its text, and any images."""

    text: str
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """How a turn ended without a reply: an error's code and Tally's message for it."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    session_id: str
    role: Role
    content: str
    turn_id: str
    status: MessageStatus
    created_at: datetime
    images: tuple[ImagePart, ...] = ()
    token_count: int | None = None
    compacted: bool = False  # a reply answered from a request compacted to fit the context
    thinking: str = ""  # a reply's reasoning, as the model streamed it
    # A user message whose turn failed, until it is answered: how, and the key that resumes it.
    failure: TurnFailure | None = None
    idempotency_key: str | None = None

    @property
    def chars(self) -> int:
        return len(self.content)


@dataclass(frozen=True, slots=True)
class MessageShape:
    """What planning a session's window reads of a message, without its text: a window of
    thousands of messages is planned without holding them all."""

    id: int
    role: Role
    token_count: int | None
    chars: int


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    tenant_id: str
    channel: str
    title: str
    summary: str
    window_start_id: int
    created_at: datetime
    updated_at: datetime
    memory_watermark_id: int = 0
    external_key: str | None = None
    user_key: str | None = None


@dataclass(frozen=True, slots=True)
class ToolConversation:
    id: int
    session_id: str
    message_id: int | None
    turn_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, object]
    result: str
    is_error: bool
    duration_ms: int
    user_message: str
    timestamp: datetime


@dataclass(slots=True)
class Usage:
    """Tokens one model call (or, added up, one turn) was billed for. `prompt_tokens` counts
    every prompt token; `cached_tokens` of them were read from the vendor's prompt cache (billed
    at a fraction) and `cache_write_tokens` were written to it (Anthropic bills a premium)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for. `arguments` is the parsed JSON object; `raw_arguments` keeps
    what the model actually sent so a malformed call can be reported back to it."""

    id: str
    name: str
    arguments: dict[str, object] = field(default_factory=dict)
    raw_arguments: str = "{}"
    is_malformed: bool = False
