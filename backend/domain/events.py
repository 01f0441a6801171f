"""Events: what a provider streams, and what a turn streams to its client (SSE)."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.domain.messages import ToolCall, Usage
from backend.domain.thinking import ThinkingBlock

# ---- provider events ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingBlockDone:
    """One complete block of the reasoning already streamed as `ThinkingDelta`s, for the tool
    loop to send back with the step's tool calls. Provider-internal: never a turn event."""

    block: ThinkingBlock


@dataclass(frozen=True, slots=True)
class ToolCallRequested:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class UsageReported:
    usage: Usage


@dataclass(frozen=True, slots=True)
class Finished:
    reason: str  # "stop", "tool_calls", "length", ...


@dataclass(frozen=True, slots=True)
class RetryScheduled:
    """The provider call failed before any output and will be retried (or fall back)."""

    attempt: int
    delay_s: float
    reason: str  # the failure's code, or "fallback"
    provider: str
    message: str = ""  # what failed: the provider, its URL and the cause


ProviderEvent = (
    TextDelta
    | ThinkingDelta
    | ThinkingBlockDone
    | ToolCallRequested
    | UsageReported
    | Finished
    | RetryScheduled
)

# ---- turn events (SSE) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnStarted:
    session_id: str
    turn_id: str
    user_message_id: int


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolApprovalRequested:
    """A tool call that runs only once a person approves it; unanswered after `timeout_s`, it
    is denied."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, object]
    timeout_s: float


@dataclass(frozen=True, slots=True)
class ToolFinished:
    tool_call_id: str
    tool_name: str
    result: str
    is_error: bool
    duration_ms: int


@dataclass(frozen=True, slots=True)
class Compacted:
    reason: str
    tokens_before: int
    tokens_after: int
    dropped_messages: int


@dataclass(frozen=True, slots=True)
class MemoryDegraded:
    """Memory is not working as it should for this turn: why, and what it means for the user."""

    code: str  # summaries_failing | memory_unreadable
    reason: str


@dataclass(frozen=True, slots=True)
class TurnFailed:
    code: str
    message: str
    status: int = 502
    retry_after: float | None = None
    incomplete_message_id: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    tool_call_id: str
    tool_name: str
    arguments: dict[str, object]
    result: str
    is_error: bool
    duration_ms: int


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    session_id: str
    turn_id: str
    user_message_id: int
    assistant_message_id: int
    reply: str
    usage: Usage
    tool_calls: tuple[ToolCallRecord, ...] = field(default_factory=tuple)
    context_tokens: int = 0  # the request's size, for a context gauge
    context_budget: int = 0  # context window minus the reply's maximum
    memory_problem: str | None = None  # the MemoryDegraded reason, when there was one


TurnEvent = (
    TurnStarted
    | TextDelta
    | ThinkingDelta
    | ToolStarted
    | ToolApprovalRequested
    | ToolFinished
    | Compacted
    | MemoryDegraded
    | RetryScheduled
    | TurnFailed
    | TurnCompleted
)
