"""The OpenAI chat-completions wire protocol, spoken by OpenAI, DeepSeek, Qwen, Ollama, vLLM...

SDK types stop at this module: requests go out as the SDK's TypedDicts and chunks come back as
domain events. Retries are ours (`resilience.py`), so the SDK's own are switched off.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from openai import AsyncStream
from openai._types import RequestOptions  # the type of `post(options=...)`
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
)
from openai.types.chat.chat_completion_chunk import ChoiceDelta, ChoiceDeltaToolCall

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
from backend.errors import EmptyReply, ProviderBadResponse, ProviderError
from backend.providers.endpoints import DEFAULT_BASE_URLS, Endpoint
from backend.providers.failures import status_error, transport_error, vendor_message
from backend.providers.openai_request import request_body
from backend.providers.resilience import parse_retry_after
from backend.settings import ProviderSettings

# Some servers refuse a request without a key even when they do not check it (Ollama, vLLM).
PLACEHOLDER_KEY = "sk-none"
# Vendors put chain-of-thought in a non-standard delta field; DeepSeek and vLLM name it
# `reasoning_content`, OpenRouter and newer vLLM `reasoning`.
REASONING_FIELDS = ("reasoning_content", "reasoning")


COMPLETIONS_PATH = "/chat/completions"
AUTHENTICATED: RequestOptions = {"security": {"bearer_auth": True}}


class OpenAICompatibleProvider:
    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        url = settings.base_url or DEFAULT_BASE_URLS["openai_compatible"]
        self.endpoint = Endpoint.of(name, settings, url)
        self._reasoning_in_tool_loop = settings.reasoning_in_tool_loop
        self._prompt_cache_key = settings.sends_prompt_cache_key(url)
        self._client = openai.AsyncOpenAI(
            base_url=url,
            api_key=settings.api_key() or PLACEHOLDER_KEY,
            timeout=httpx2.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
            max_retries=0,
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        reply = _ReplyAssembly(self.endpoint)
        has_response = False
        body = request_body(
            request,
            reasoning_in_tool_loop=self._reasoning_in_tool_loop,
            prompt_cache_key=self._prompt_cache_key,
        )
        try:
            if not request.stream:  # nobody watches tokens arrive: one parse, not one per chunk
                completion = await self._client.post(
                    COMPLETIONS_PATH, cast_to=ChatCompletion, body=body, options=AUTHENTICATED
                )
                has_response = True
                events = reply.feed_completion(completion)
            else:
                chunks = await self._client.post(
                    COMPLETIONS_PATH,
                    cast_to=ChatCompletion,
                    body={**body, "stream": True, "stream_options": {"include_usage": True}},
                    options=AUTHENTICATED,
                    stream=True,
                    stream_cls=AsyncStream[ChatCompletionChunk],
                )
                has_response = True
                events = []
                async with chunks:
                    async for chunk in chunks:
                        for event in reply.feed(chunk):
                            yield event
        except (openai.OpenAIError, httpx2.HTTPError, json.JSONDecodeError) as exc:
            error = map_error(self.endpoint, exc, has_response=has_response, model=request.model)
            raise error from exc
        for event in [*events, *reply.finish()]:
            yield event

    async def aclose(self) -> None:
        await self._client.close()


def map_error(
    endpoint: Endpoint, exc: Exception, *, has_response: bool, model: str
) -> ProviderError:
    """Every SDK and transport failure of this adapter, as our error. `has_response` tells a
    connection that never opened (unavailable) from a stream cut after it began (bad response)."""
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError):  # timeouts included
        is_timeout = isinstance(exc, openai.APITimeoutError)
        return transport_error(endpoint, exc, has_response=has_response, is_timeout=is_timeout)
    if isinstance(exc, openai.APIStatusError):
        message, code = vendor_message(exc.response)
        return status_error(
            endpoint,
            exc.status_code,
            vendor_message=message,
            vendor_code=code,
            model=model,
            path=exc.response.request.url.path,
            retry_after=parse_retry_after(exc.response.headers),
        )
    # An `{"error": ...}` object inside the stream, unparsable chunk data, or a schema mismatch.
    return ProviderBadResponse(endpoint.provider, f"unusable response: {exc}", url=endpoint.url)


# ---- response --------------------------------------------------------------------------------


@dataclass
class _PendingToolCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def complete(self, index: int) -> ToolCall:
        raw = "".join(self.arguments)
        call_id = self.id or f"call_{index}"  # some local servers omit ids
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict) or not self.name:
            return ToolCall(id=call_id, name=self.name, raw_arguments=raw, is_malformed=True)
        return ToolCall(id=call_id, name=self.name, arguments=parsed, raw_arguments=raw)


@dataclass
class _ReplyAssembly:
    """Folds chunks into events: deltas pass through at once, tool calls are held until the
    stream ends because their arguments arrive in pieces."""

    endpoint: Endpoint
    has_text: bool = False
    finish_reason: str | None = None
    usage: Usage | None = None
    tool_calls: dict[int, _PendingToolCall] = field(default_factory=dict)
    reasoning: list[str] = field(default_factory=list)

    def feed(self, chunk: ChatCompletionChunk) -> list[ProviderEvent]:
        if chunk.usage is not None:
            self.usage = usage_of(chunk.usage)
        events: list[ProviderEvent] = []
        for choice in self._choices(chunk):
            if choice.index != 0:  # we never ask for n > 1
                continue
            if choice.delta is None:
                raise self._shapeless("a chunk's choice has no delta")
            events.extend(self._delta(choice.delta))
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        return events

    def feed_completion(self, completion: ChatCompletion) -> list[ProviderEvent]:
        """A whole (non-streamed) completion, as the events its stream would have given."""
        if completion.usage is not None:
            self.usage = usage_of(completion.usage)
        events: list[ProviderEvent] = []
        choices = self._choices(completion)
        if not choices:
            raise self._shapeless("the answer holds no choices")
        for choice in choices[:1]:
            message = choice.message
            if message is None:
                raise self._shapeless("the answer's choice has no message")
            reasoning = _reasoning_text(message)
            if reasoning:
                self.reasoning.append(reasoning)
                events.append(ThinkingDelta(reasoning))
            if message.content:
                self.has_text = True
                events.append(TextDelta(message.content))
            for index, call in enumerate(message.tool_calls or ()):
                if call.type == "function":
                    pending = _PendingToolCall(call.id, call.function.name)
                    pending.arguments.append(call.function.arguments)
                    self.tool_calls[index] = pending
            self.finish_reason = choice.finish_reason
        return events

    def _choices(self, answer: ChatCompletion | ChatCompletionChunk) -> list[Any]:
        """The answer's choices. The SDK builds answers without validating them, so a
        shape-valid reply may lack them: that is a bad response, not a crash."""
        choices = getattr(answer, "choices", None)
        if choices is None:
            return []
        if not isinstance(choices, list):
            raise self._shapeless("its choices are not a list")
        return choices

    def _shapeless(self, what: str) -> ProviderBadResponse:
        return ProviderBadResponse(self.endpoint.provider, what, url=self.endpoint.url)

    def _delta(self, delta: ChoiceDelta) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        reasoning = _reasoning_text(delta)
        if reasoning:
            self.reasoning.append(reasoning)
            events.append(ThinkingDelta(reasoning))
        if delta.content:
            self.has_text = True
            events.append(TextDelta(delta.content))
        for piece in delta.tool_calls or ():
            self._tool_call_piece(piece)
        return events

    def _tool_call_piece(self, piece: ChoiceDeltaToolCall) -> None:
        pending = self.tool_calls.setdefault(piece.index, _PendingToolCall())
        if piece.id:
            pending.id = piece.id
        if piece.function is not None:
            if piece.function.name:
                pending.name = piece.function.name
            if piece.function.arguments:
                pending.arguments.append(piece.function.arguments)

    def finish(self) -> list[ProviderEvent]:
        provider, url = self.endpoint.provider, self.endpoint.url
        if self.finish_reason is None:
            raise ProviderBadResponse(provider, "the stream ended without a finish reason", url=url)
        if not self.has_text and not self.tool_calls:
            raise EmptyReply(provider, "the model sent no text and no tool call", url=url)
        # The reasoning is one block: the protocol has no signatures and no block boundaries.
        events: list[ProviderEvent] = (
            [ThinkingBlockDone(ThinkingBlock("".join(self.reasoning)))] if self.reasoning else []
        )
        events += [
            ToolCallRequested(self.tool_calls[index].complete(index))
            for index in sorted(self.tool_calls)
        ]
        if self.usage is not None:
            events.append(UsageReported(self.usage))
        # Some servers (older Ollama) say "stop" after tool calls; the tool loop keys on this.
        events.append(Finished("tool_calls" if self.tool_calls else self.finish_reason))
        return events


def usage_of(reported: CompletionUsage) -> Usage:
    """What the vendor billed. OpenAI says what its prompt cache served in
    `prompt_tokens_details` (some gateways add cache writes there); DeepSeek says it as
    `prompt_cache_hit_tokens`."""
    details = reported.prompt_tokens_details
    cached = details.cached_tokens if details is not None else None
    if cached is None:
        hit = (reported.model_extra or {}).get("prompt_cache_hit_tokens")
        cached = hit if isinstance(hit, int) else 0
    written = (details.cache_write_tokens if details is not None else None) or 0
    return Usage(reported.prompt_tokens, reported.completion_tokens, cached, written)


def _reasoning_text(delta: ChoiceDelta | ChatCompletionMessage) -> str:
    extra = delta.model_extra or {}
    for name in REASONING_FIELDS:
        value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return ""
