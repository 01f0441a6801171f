"""The Anthropic Messages wire protocol.

Raw stream events (`messages.create(stream=True)`) are translated here; the SDK's accumulating
helper would rebuild a whole message we never use. Retries are ours, so the SDK's are off.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

import anthropic
import httpx2
from anthropic import omit
from anthropic.types import (
    Base64ImageSourceParam,
    ImageBlockParam,
    InputJSONDelta,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    TextBlock,
    TextBlockParam,
    ToolChoiceParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
    ToolUseBlockParam,
)
from anthropic.types import TextDelta as SDKTextDelta
from anthropic.types import ThinkingDelta as SDKThinkingDelta

from backend.domain.events import (
    Finished,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallRequested,
    UsageReported,
)
from backend.domain.messages import ImagePart, ToolCall, Usage
from backend.domain.requests import ChatRequest, RequestMessage, ToolSpec
from backend.errors import (
    EmptyReply,
    ProviderAuthFailed,
    ProviderBadRequest,
    ProviderBadResponse,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
)
from backend.providers.endpoints import DEFAULT_BASE_URLS, Endpoint
from backend.providers.failures import status_error, transport_error
from backend.providers.resilience import parse_retry_after
from backend.settings import ProviderSettings

PLACEHOLDER_KEY = "sk-ant-none"  # keeps the SDK from hunting for credential files

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

# An `event: error` inside a 200 stream carries only the error type, no status.
STREAM_ERRORS: dict[str, type[ProviderError]] = {
    "overloaded_error": ProviderUnavailable,
    "api_error": ProviderUnavailable,
    "rate_limit_error": ProviderRateLimited,
    "timeout_error": ProviderTimeout,
    "authentication_error": ProviderAuthFailed,
    "permission_error": ProviderAuthFailed,
    "invalid_request_error": ProviderBadRequest,
}

ImageMediaType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
IMAGE_MEDIA_TYPES: dict[str, ImageMediaType] = {
    "image/jpeg": "image/jpeg",
    "image/jpg": "image/jpeg",
    "image/png": "image/png",
    "image/gif": "image/gif",
    "image/webp": "image/webp",
}

Block = TextBlockParam | ImageBlockParam | ToolUseBlockParam | ToolResultBlockParam


class AnthropicProvider:
    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        url = settings.base_url or DEFAULT_BASE_URLS["anthropic"]
        self.endpoint = Endpoint.of(name, settings, url)
        self._client = anthropic.AsyncAnthropic(
            base_url=url,
            api_key=settings.api_key() or PLACEHOLDER_KEY,
            timeout=httpx2.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
            max_retries=0,
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        reply = _ReplyAssembly(self.endpoint)
        has_response = False
        try:
            events = await self._client.messages.create(
                model=request.model,
                max_tokens=request.max_output_tokens,
                system=request.system or omit,
                messages=compile_messages(request.messages, provider=self.name),
                tools=[_tool_spec(tool) for tool in request.tools] if request.tools else omit,
                tool_choice=_tool_choice(request) if request.tools else omit,
                stream=True,
                extra_body=_extra_body(request),
            )
            has_response = True
            async with events:
                async for event in events:
                    for translated in reply.feed(event):
                        yield translated
        except (anthropic.AnthropicError, httpx2.HTTPError, json.JSONDecodeError) as exc:
            error = map_error(self.endpoint, exc, has_response=has_response, model=request.model)
            raise error from exc
        for translated in reply.finish():
            yield translated

    async def aclose(self) -> None:
        await self._client.close()


def _extra_body(request: ChatRequest) -> dict[str, object] | None:
    # This SDK version has no `temperature` argument; the API still accepts the field.
    body: dict[str, object] = dict(request.extra)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body or None


def map_error(
    endpoint: Endpoint, exc: Exception, *, has_response: bool, model: str
) -> ProviderError:
    """Every SDK and transport failure of this adapter, as our error. `has_response` tells a
    connection that never opened (unavailable) from a stream cut after it began (bad response)."""
    provider, url = endpoint.provider, endpoint.url
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):  # timeouts included
        is_timeout = isinstance(exc, anthropic.APITimeoutError)
        return transport_error(endpoint, exc, has_response=has_response, is_timeout=is_timeout)
    if isinstance(exc, anthropic.APIStatusError):
        message = exc.api_message or ""
        retry_after = parse_retry_after(exc.response.headers)
        if exc.status_code < 400:  # an error event inside a started stream
            error_class = STREAM_ERRORS.get(exc.type or "", ProviderBadResponse)
            words = f"{exc.type}: {message}"
            return error_class(provider, words, retry_after=retry_after, url=url)
        return status_error(
            endpoint,
            exc.status_code,
            vendor_message=message,
            vendor_code=exc.error_code,
            model=model,
            path=exc.response.request.url.path,
            retry_after=retry_after,
        )
    return ProviderBadResponse(provider, f"unusable response: {exc}", url=url)


# ---- request ---------------------------------------------------------------------------------


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
    blocks: list[Block] = [_image_block(image, provider=provider) for image in message.images]
    if message.content:  # the API rejects empty text blocks
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(_tool_use_block(call) for call in message.tool_calls)
    return blocks


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


def _tool_choice(request: ChatRequest) -> ToolChoiceParam:
    # "none": the last call of a tool loop answers in text; the tools stay declared because
    # the history holds tool blocks.
    if request.tool_choice == "none":
        return {"type": "none"}
    return {"type": "auto"}


def _tool_spec(tool: ToolSpec) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


# ---- response --------------------------------------------------------------------------------


@dataclass
class _PendingToolUse:
    id: str
    name: str
    partial_json: list[str] = field(default_factory=list)

    def complete(self) -> ToolCall:
        raw = "".join(self.partial_json)
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return ToolCall(id=self.id, name=self.name, raw_arguments=raw, is_malformed=True)
        return ToolCall(id=self.id, name=self.name, arguments=parsed, raw_arguments=raw or "{}")


@dataclass
class _ReplyAssembly:
    """Folds raw events into ours: deltas pass through at once; tool calls and usage are held
    until `message_stop`, which alone proves the reply is complete."""

    endpoint: Endpoint
    has_text: bool = False
    is_stopped: bool = False
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    tool_uses: dict[int, _PendingToolUse] = field(default_factory=dict)

    def feed(self, event: RawMessageStreamEvent) -> list[ProviderEvent]:
        if isinstance(event, RawMessageStartEvent):
            # The SDK builds events without validating them: a shape-valid event may lack parts.
            usage = getattr(getattr(event, "message", None), "usage", None)
            if usage is None or usage.input_tokens is None:
                raise ProviderBadResponse(
                    self.endpoint.provider,
                    "message_start carries no message and usage",
                    url=self.endpoint.url,
                )
            self.usage.prompt_tokens = (
                usage.input_tokens
                + (usage.cache_creation_input_tokens or 0)
                + (usage.cache_read_input_tokens or 0)
            )
            self.usage.completion_tokens = usage.output_tokens or 0
        elif isinstance(event, RawContentBlockStartEvent):
            return self._block_start(event)
        elif isinstance(event, RawContentBlockDeltaEvent):
            return self._block_delta(event)
        elif isinstance(event, RawMessageDeltaEvent):
            delta, usage = getattr(event, "delta", None), getattr(event, "usage", None)
            self.stop_reason = getattr(delta, "stop_reason", None) or self.stop_reason
            if usage is not None and usage.output_tokens is not None:
                self.usage.completion_tokens = usage.output_tokens  # cumulative
        elif isinstance(event, RawMessageStopEvent):
            self.is_stopped = True
        return []

    def _block_start(self, event: RawContentBlockStartEvent) -> list[ProviderEvent]:
        block = event.content_block
        if isinstance(block, ToolUseBlock):
            self.tool_uses[event.index] = _PendingToolUse(block.id, block.name)
        elif isinstance(block, TextBlock) and block.text:
            self.has_text = True
            return [TextDelta(block.text)]
        return []

    def _block_delta(self, event: RawContentBlockDeltaEvent) -> list[ProviderEvent]:
        delta = event.delta
        if isinstance(delta, SDKTextDelta) and delta.text:
            self.has_text = True
            return [TextDelta(delta.text)]
        if isinstance(delta, SDKThinkingDelta) and delta.thinking:
            return [ThinkingDelta(delta.thinking)]
        if isinstance(delta, InputJSONDelta) and event.index in self.tool_uses:
            self.tool_uses[event.index].partial_json.append(delta.partial_json)
        return []

    def finish(self) -> list[ProviderEvent]:
        provider, url = self.endpoint.provider, self.endpoint.url
        if not self.is_stopped:
            raise ProviderBadResponse(provider, "the stream ended before message_stop", url=url)
        if not self.has_text and not self.tool_uses:
            raise EmptyReply(provider, "the model sent no text and no tool call", url=url)
        events: list[ProviderEvent] = [
            ToolCallRequested(self.tool_uses[index].complete()) for index in sorted(self.tool_uses)
        ]
        events.append(UsageReported(self.usage))
        reason = self.stop_reason or "stop"
        events.append(Finished(STOP_REASONS.get(reason, reason)))
        return events
