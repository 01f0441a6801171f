"""The request compiler: stored state in, one model request out. Pure: no I/O.

What is stored (messages, summaries, memory) is never what is sent; this module is the only
place that decides what the model sees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from backend.domain.messages import StoredMessage
from backend.domain.requests import ChatRequest, RequestMessage, ToolSpec


@dataclass(frozen=True, slots=True)
class ModelLimits:
    name: str
    max_output_tokens: int
    temperature: float | None = None
    supports_vision: bool = True
    thinking_budget_tokens: int | None = None  # extended thinking (Anthropic); None: off


def history_from_window(window: Sequence[StoredMessage]) -> list[StoredMessage]:
    """Cut the window so it starts at a user message: never half a turn."""
    for index, message in enumerate(window):
        if message.role == "user":
            return list(window[index:])
    return []


def to_request_message(message: StoredMessage, *, supports_vision: bool) -> RequestMessage:
    images = message.images if supports_vision else ()
    content = message.content
    if message.images and not supports_vision:
        content += f"\n[{len(message.images)} image(s) omitted: this model cannot see images]"
    return RequestMessage(role=message.role, content=content, images=images)


def compile_request(
    *,
    system: str,
    window: Sequence[StoredMessage],
    tools: Sequence[ToolSpec],
    model: ModelLimits,
    turn_context: str = "",
    cache_key: str | None = None,
) -> ChatRequest:
    """The request for one turn. `window` ends with the turn's own user message, which carries
    `turn_context` (what changes every turn) after its text.

    The previous turn's request began with everything up to its own user message's text, as
    long as the system prompt and the window's start stayed put: the vendor's prompt cache can
    reuse that prefix.
    """
    history = history_from_window(window)
    messages = [to_request_message(m, supports_vision=model.supports_vision) for m in history]
    if messages and turn_context:
        messages[-1] = dataclasses.replace(messages[-1], context=turn_context)
    return ChatRequest(
        model=model.name,
        system=system,
        messages=tuple(messages),
        cache_key=cache_key,
        tools=tuple(tools),
        max_output_tokens=model.max_output_tokens,
        temperature=model.temperature,
        thinking_budget_tokens=model.thinking_budget_tokens,
    )
