"""The request compiled for a model: what is sent, never what is stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from backend.domain.messages import ImagePart, ToolCall
from backend.domain.thinking import ThinkingBlock


@dataclass(frozen=True, slots=True)
class RequestMessage:
    """One message of a model request.

    `role="assistant"` may carry `tool_calls`; `role="tool"` carries the result of the call
    named by `tool_call_id`. `thinking` is the reasoning of the step that made those calls,
    set only within the tool loop of the current turn (stored history carries none); each
    adapter sends it back where its vendor requires it and drops it where it forbids it.

    `context` is what this request adds after the turn's own user message: the time and the
    memory picked for that message. It changes every turn, so it sits at the end, where the
    next turn's request no longer carries it (that one's history holds the message without it),
    and the prefix before it stays cacheable.
    """

    role: Literal["user", "assistant", "tool"]
    content: str
    images: tuple[ImagePart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False
    thinking: tuple[ThinkingBlock, ...] = ()
    context: str = ""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, object]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    system: str
    messages: tuple[RequestMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int = 4096
    temperature: float | None = None
    thinking_budget_tokens: int | None = None  # Anthropic extended thinking; None: off
    tool_choice: Literal["auto", "none"] = "auto"
    stream: bool = True  # False: nobody watches tokens arrive; an adapter may ask for one reply
    extra: dict[str, object] = field(default_factory=dict)
    # Names the conversation for the vendor's prompt cache (OpenAI's `prompt_cache_key`), so
    # its turns reach the machine that holds their prefix; None: no hint.
    cache_key: str | None = None
