"""The OpenAI chat-completions wire protocol, spoken by OpenAI, DeepSeek, Qwen, Ollama, vLLM...

SDK types stop at this module: requests go out as the SDK's TypedDicts, and answers come back as
plain JSON (`openai_stream.py` decodes a stream) that this module folds into domain events. The
SDK still sends the request and raises its errors; it no longer builds a model object per chunk,
which cost more CPU than the rest of a streamed turn. Retries are ours (`resilience.py`), so the
SDK's own are switched off.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from openai._types import RequestOptions  # the type of `post(options=...)`

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
from backend.providers.failures import (
    UNPARSABLE,
    status_error,
    transport_error,
    vendor_message,
)
from backend.providers.openai_request import request_body
from backend.providers.openai_stream import event_payloads
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
            if not request.stream:  # nobody watches tokens arrive: one reply, not a stream
                response = await self._client.post(
                    COMPLETIONS_PATH, cast_to=httpx2.Response, body=body, options=AUTHENTICATED
                )
                has_response = True
                events = reply.feed_completion(json.loads(response.content))
            else:
                response = await self._client.post(
                    COMPLETIONS_PATH,
                    cast_to=httpx2.Response,
                    body={**body, "stream": True, "stream_options": {"include_usage": True}},
                    options=AUTHENTICATED,
                    stream=True,
                )
                has_response = True
                events = []
                async with aclosing(event_payloads(response)) as chunks:
                    async for chunk in chunks:
                        for event in reply.feed(chunk):
                            yield event
        except (openai.OpenAIError, httpx2.HTTPError, *UNPARSABLE) as exc:
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
        except UNPARSABLE:
            parsed = None
        if not isinstance(parsed, dict) or not self.name:
            return ToolCall(id=call_id, name=self.name, raw_arguments=raw, is_malformed=True)
        return ToolCall(id=call_id, name=self.name, arguments=parsed, raw_arguments=raw)


@dataclass
class _ReplyAssembly:
    """Folds answers (the JSON of chunks, or of one completion) into events: deltas pass through
    at once, tool calls are held until the stream ends because their arguments arrive in pieces.
    Nothing validated the JSON before: a shape this cannot use is a bad response, not a crash."""

    endpoint: Endpoint
    has_text: bool = False
    finish_reason: str | None = None
    usage: Usage | None = None
    tool_calls: dict[int, _PendingToolCall] = field(default_factory=dict)
    reasoning: list[str] = field(default_factory=list)

    def feed(self, chunk: object) -> list[ProviderEvent]:
        """One `chat.completion.chunk`."""
        events: list[ProviderEvent] = []
        for choice in self._choices(chunk, "a chunk"):
            if choice.get("index", 0) != 0:  # we never ask for n > 1
                continue
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                raise self._shapeless("a chunk's choice has no delta")
            events.extend(self._message(delta, delta.get("tool_calls")))
            self._finish_reason(choice)
        return events

    def feed_completion(self, completion: object) -> list[ProviderEvent]:
        """A whole (non-streamed) `chat.completion`, as the events its stream would have given."""
        choices = self._choices(completion, "the answer")
        if not choices:
            raise self._shapeless("the answer holds no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self._shapeless("the answer's choice has no message")
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise self._shapeless("its tool calls are not a list")
        # Whole calls are pieces too: each one the only piece of its index.
        pieces = [
            {**call, "index": index}
            for index, call in enumerate(calls)
            if isinstance(call, dict) and call.get("type", "function") == "function"
        ]
        events = self._message(message, pieces)
        self._finish_reason(choice)
        return events

    def _choices(self, answer: object, what: str) -> list[dict[str, Any]]:
        """The answer's choices, after taking its usage."""
        if not isinstance(answer, dict):
            raise self._shapeless(f"{what} is not a JSON object")
        usage = answer.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise self._shapeless("its usage is not an object")
            self.usage = usage_of(usage)
        choices = answer.get("choices")
        if choices is None:
            return []
        if not isinstance(choices, list):
            raise self._shapeless("its choices are not a list")
        if not all(isinstance(choice, dict) for choice in choices):
            raise self._shapeless("its choices are not objects")
        return choices

    def _finish_reason(self, choice: dict[str, Any]) -> None:
        reason = choice.get("finish_reason")
        if reason is not None:
            if not isinstance(reason, str):
                raise self._shapeless("its finish reason is not a string")
            self.finish_reason = reason

    def _shapeless(self, what: str) -> ProviderBadResponse:
        return ProviderBadResponse(self.endpoint.provider, what, url=self.endpoint.url)

    def _message(self, message: dict[str, Any], tool_calls: object) -> list[ProviderEvent]:
        """A delta, or a whole message: both carry reasoning, text and tool call pieces."""
        events: list[ProviderEvent] = []
        reasoning = _reasoning_text(message)
        if reasoning:
            self.reasoning.append(reasoning)
            events.append(ThinkingDelta(reasoning))
        content = message.get("content")
        if content and isinstance(content, str):
            self.has_text = True
            events.append(TextDelta(content))
        if tool_calls:
            if not isinstance(tool_calls, list):
                raise self._shapeless("its tool calls are not a list")
            for piece in tool_calls:
                self._tool_call_piece(piece)
        return events

    def _tool_call_piece(self, piece: object) -> None:
        index = piece.get("index") if isinstance(piece, dict) else None
        if not isinstance(piece, dict) or not isinstance(index, int):
            raise self._shapeless("a tool call has no index")
        pending = self.tool_calls.setdefault(index, _PendingToolCall())
        call_id = piece.get("id")
        if call_id and isinstance(call_id, str):
            pending.id = call_id
        function = piece.get("function")
        if isinstance(function, dict):
            name, arguments = function.get("name"), function.get("arguments")
            if name and isinstance(name, str):
                pending.name = name
            if arguments and isinstance(arguments, str):
                pending.arguments.append(arguments)

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


def usage_of(reported: dict[str, Any]) -> Usage:
    """What the vendor billed, from a `usage` object. OpenAI says what its prompt cache served
    in `prompt_tokens_details` (some gateways add cache writes there); DeepSeek says it as
    `prompt_cache_hit_tokens`. A count that is not an integer counts as 0."""
    details = reported.get("prompt_tokens_details")
    if not isinstance(details, dict):
        details = {}
    cached = details.get("cached_tokens")
    if cached is None:
        cached = reported.get("prompt_cache_hit_tokens")
    return Usage(
        _count(reported.get("prompt_tokens")),
        _count(reported.get("completion_tokens")),
        _count(cached),
        _count(details.get("cache_write_tokens")),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _reasoning_text(message: dict[str, Any]) -> str:
    for name in REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return ""
