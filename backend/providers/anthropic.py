"""The Anthropic Messages wire protocol.

Raw stream events (`messages.create(stream=True)`) are translated here; the SDK's accumulating
helper would rebuild a whole message we never use. Retries are ours, so the SDK's are off.
Requests are compiled in `anthropic_request.py`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anthropic
import httpx2
from anthropic import omit
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    ToolUseBlock,
)
from anthropic.types import TextDelta as SDKTextDelta
from anthropic.types import ThinkingBlock as SDKThinkingBlock
from anthropic.types import ThinkingDelta as SDKThinkingDelta

from backend.domain.events import (
    Finished,
    ProviderEvent,
    TextDelta,
    ThinkingBlockDone,
    ThinkingDelta,
    ToolCallRequested,
    UsageReported,
)
from backend.domain.messages import ToolCall, Usage
from backend.domain.requests import ChatRequest
from backend.domain.thinking import ThinkingBlock
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
from backend.providers.anthropic_request import (
    compile_messages,
    extra_body,
    system_param,
    thinking_param,
    tool_choice_param,
    tool_param,
)
from backend.providers.endpoints import DEFAULT_BASE_URLS, Endpoint
from backend.providers.failures import UNPARSABLE, status_error, transport_error
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
                system=system_param(request),
                messages=compile_messages(request.messages, provider=self.name),
                tools=[tool_param(tool) for tool in request.tools] if request.tools else omit,
                tool_choice=tool_choice_param(request) if request.tools else omit,
                thinking=thinking_param(request),
                stream=True,
                extra_body=extra_body(request),
            )
            has_response = True
            async with events:
                async for event in events:
                    for translated in reply.feed(event):
                        yield translated
        except (anthropic.AnthropicError, httpx2.HTTPError, *UNPARSABLE) as exc:
            error = map_error(self.endpoint, exc, has_response=has_response, model=request.model)
            raise error from exc
        for translated in reply.finish():
            yield translated

    async def aclose(self) -> None:
        await self._client.close()


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
        except UNPARSABLE:
            parsed = None
        if not isinstance(parsed, dict):
            return ToolCall(id=self.id, name=self.name, raw_arguments=raw, is_malformed=True)
        return ToolCall(id=self.id, name=self.name, arguments=parsed, raw_arguments=raw or "{}")


@dataclass
class _PendingThinking:
    """A thinking block being streamed: its text in pieces, then its signature (sent just
    before the block ends); a redacted block arrives whole, as opaque data."""

    parts: list[str] = field(default_factory=list)
    signature: str = ""
    redacted_data: str = ""

    def complete(self) -> ThinkingBlock:
        return ThinkingBlock("".join(self.parts), self.signature, self.redacted_data)


@dataclass
class _ReplyAssembly:
    """Folds raw events into ours: deltas pass through at once; thinking blocks, tool calls and
    usage are held until `message_stop`, which alone proves the reply is complete."""

    endpoint: Endpoint
    has_text: bool = False
    is_stopped: bool = False
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    tool_uses: dict[int, _PendingToolUse] = field(default_factory=dict)
    thinking: dict[int, _PendingThinking] = field(default_factory=dict)

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
            # `input_tokens` counts only what was neither read from nor written to the cache.
            self.usage.cached_tokens = usage.cache_read_input_tokens or 0
            self.usage.cache_write_tokens = usage.cache_creation_input_tokens or 0
            self.usage.prompt_tokens = (
                usage.input_tokens + self.usage.cached_tokens + self.usage.cache_write_tokens
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
        elif isinstance(block, SDKThinkingBlock):
            pending = _PendingThinking(signature=block.signature or "")
            self.thinking[event.index] = pending
            if block.thinking:
                pending.parts.append(block.thinking)
                return [ThinkingDelta(block.thinking)]
        elif isinstance(block, RedactedThinkingBlock):
            self.thinking[event.index] = _PendingThinking(redacted_data=block.data)
        return []

    def _block_delta(self, event: RawContentBlockDeltaEvent) -> list[ProviderEvent]:
        delta = event.delta
        if isinstance(delta, SDKTextDelta) and delta.text:
            self.has_text = True
            return [TextDelta(delta.text)]
        if isinstance(delta, SDKThinkingDelta) and delta.thinking:
            if event.index in self.thinking:
                self.thinking[event.index].parts.append(delta.thinking)
            return [ThinkingDelta(delta.thinking)]
        if isinstance(delta, SignatureDelta) and event.index in self.thinking:
            self.thinking[event.index].signature = delta.signature  # whole, as the SDK keeps it
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
            ThinkingBlockDone(self.thinking[index].complete()) for index in sorted(self.thinking)
        ]
        events += [
            ToolCallRequested(self.tool_uses[index].complete()) for index in sorted(self.tool_uses)
        ]
        events.append(UsageReported(self.usage))
        reason = self.stop_reason or "stop"
        events.append(Finished(STOP_REASONS.get(reason, reason)))
        return events
