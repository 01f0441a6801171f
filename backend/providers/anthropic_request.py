"""Our request as Anthropic Messages parameters: the SDK's TypedDicts, built from domain types.

Prompt caching: Anthropic caches a prompt's prefix (tools, system, messages, in that order) up to
a block marked with `cache_control`, and a later request reads the longest cached prefix ending
at one of its block boundaries, up to 20 blocks before a mark. The marks go on the system
prompt, on the turn's own user message (before its context, which changes every turn: the next
turn's request holds that message without it), and on the last tool result of a tool loop's
step. A one-off request (a summary) gets no mark on its message: a cache write costs more than
reading the prompt plainly, and nothing would read it back.
"""

from __future__ import annotations

from typing import Literal

from anthropic import Omit, omit
from anthropic.types import (
    Base64ImageSourceParam,
    CacheControlEphemeralParam,
    ImageBlockParam,
    MessageParam,
    RedactedThinkingBlockParam,
    TextBlockParam,
    ThinkingBlockParam,
    ThinkingConfigEnabledParam,
    ToolChoiceParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)

from backend.domain.messages import ImagePart, ToolCall
from backend.domain.requests import ChatRequest, RequestMessage, ToolSpec
from backend.domain.thinking import ThinkingBlock
from backend.errors import ProviderBadRequest

ImageMediaType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
IMAGE_MEDIA_TYPES: dict[str, ImageMediaType] = {
    "image/jpeg": "image/jpeg",
    "image/jpg": "image/jpeg",
    "image/png": "image/png",
    "image/gif": "image/gif",
    "image/webp": "image/webp",
}

Block = (
    TextBlockParam
    | ImageBlockParam
    | ToolUseBlockParam
    | ToolResultBlockParam
    | ThinkingBlockParam
    | RedactedThinkingBlockParam
)


BREAKPOINT: CacheControlEphemeralParam = {"type": "ephemeral"}


def system_param(request: ChatRequest) -> list[TextBlockParam] | Omit:
    if not request.system:
        return omit
    return [{"type": "text", "text": request.system, "cache_control": BREAKPOINT}]


def thinking_param(request: ChatRequest) -> ThinkingConfigEnabledParam | Omit:
    if request.thinking_budget_tokens is None:
        return omit
    return {"type": "enabled", "budget_tokens": request.thinking_budget_tokens}


def extra_body(request: ChatRequest) -> dict[str, object] | None:
    # This SDK version has no `temperature` argument; the API still accepts the field, but
    # refuses it together with thinking.
    body: dict[str, object] = dict(request.extra)
    if request.temperature is not None and request.thinking_budget_tokens is None:
        body["temperature"] = request.temperature
    return body or None


def compile_messages(messages: tuple[RequestMessage, ...], *, provider: str) -> list[MessageParam]:
    """Our messages as Anthropic's: tool results travel in user messages, and consecutive
    messages of one role are merged because the API requires user and assistant to alternate."""
    turns: list[tuple[Literal["user", "assistant"], list[Block]]] = []
    for message in messages:
        role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message, provider=provider)
        if not blocks:
            continue  # the API rejects empty content
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    if turns and messages[-1].role == "tool":  # a tool loop's next step: mark its end too
        _mark(turns[-1][1][-1])
    return [
        {"role": "user", "content": blocks}
        if role == "user"
        else {"role": "assistant", "content": blocks}
        for role, blocks in turns
    ]


def _blocks(message: RequestMessage, *, provider: str) -> list[Block]:
    if message.role == "tool":
        result: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if message.is_error:
            result["is_error"] = True
        return [result]
    # A tool-calling step's thinking comes first, unmodified: within a tool loop the API
    # answers 400 without it. An unsigned block is not Anthropic's (another vendor's reasoning,
    # after a fallback) and would be refused.
    blocks: list[Block] = [
        _thinking_block(block) for block in message.thinking if block.signature or block.is_redacted
    ]
    blocks.extend(_image_block(image, provider=provider) for image in message.images)
    if message.content:  # the API rejects empty text blocks
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(_tool_use_block(call) for call in message.tool_calls)
    if message.context:
        if blocks:
            _mark(blocks[-1])
        blocks.append({"type": "text", "text": message.context})
    return blocks


def _mark(block: Block) -> None:
    """A cache breakpoint after `block` (thinking blocks take none: the API refuses them)."""
    if block["type"] not in ("thinking", "redacted_thinking"):
        block["cache_control"] = BREAKPOINT  # type: ignore[typeddict-unknown-key]


def _thinking_block(block: ThinkingBlock) -> ThinkingBlockParam | RedactedThinkingBlockParam:
    if block.is_redacted:
        return {"type": "redacted_thinking", "data": block.redacted_data}
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}


def _image_block(image: ImagePart, *, provider: str) -> ImageBlockParam:
    media_type = IMAGE_MEDIA_TYPES.get(image.media_type.lower())
    if media_type is None:
        raise ProviderBadRequest(provider, f"image type {image.media_type!r} is not supported")
    source: Base64ImageSourceParam = {
        "type": "base64",
        "media_type": media_type,
        "data": image.data,
    }
    return {"type": "image", "source": source}


def _tool_use_block(call: ToolCall) -> ToolUseBlockParam:
    # A malformed call has no usable input; the tool result already tells the model why.
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}


def tool_choice_param(request: ChatRequest) -> ToolChoiceParam:
    # "none": the last call of a tool loop answers in text; the tools stay declared because
    # the history holds tool blocks. (With thinking, only "auto" and "none" are allowed.)
    if request.tool_choice == "none":
        return {"type": "none"}
    return {"type": "auto"}


def tool_param(tool: ToolSpec) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
