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
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionChunk,
    ChatCompletionContentPartParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
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
from backend.domain.requests import ChatRequest, RequestMessage, ToolSpec
from backend.domain.thinking import ThinkingBlock
from backend.errors import EmptyReply, ProviderBadResponse, ProviderError
from backend.providers.endpoints import DEFAULT_BASE_URLS, Endpoint
from backend.providers.failures import status_error, transport_error, vendor_message
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
        self._client = openai.AsyncOpenAI(
            base_url=url,
            api_key=settings.api_key() or PLACEHOLDER_KEY,
            timeout=httpx2.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
            max_retries=0,
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        reply = _ReplyAssembly(self.endpoint)
        has_response = False
        body = _request_body(request, reasoning_in_tool_loop=self._reasoning_in_tool_loop)
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


def _request_body(
    request: ChatRequest, *, reasoning_in_tool_loop: bool = False
) -> dict[str, object]:
    """The JSON body of a Chat Completions call. Built as plain JSON and posted through the SDK
    client as is: `completions.create` would re-walk every message against its TypedDicts on
    each call, which cost more CPU than the rest of a turn's request handling."""
    body: dict[str, object] = {
        "model": request.model,
        "messages": compile_messages(request, reasoning_in_tool_loop=reasoning_in_tool_loop),
        "max_tokens": request.max_output_tokens,
    }
    if request.tools:
        body["tools"] = [_tool_spec(tool) for tool in request.tools]
        body["tool_choice"] = request.tool_choice
    if request.temperature is not None:
        body["temperature"] = request.temperature
    body.update(request.extra)  # vendor-specific knobs from the config
    return body


def _tool_spec(tool: ToolSpec) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


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


# ---- request ---------------------------------------------------------------------------------


def compile_messages(
    request: ChatRequest, *, reasoning_in_tool_loop: bool = False
) -> list[ChatCompletionMessageParam]:
    """The request's messages; with `reasoning_in_tool_loop`, tool-call messages carry their step's
    reasoning as `reasoning_content` (never otherwise: most vendors reject the field)."""
    messages: list[ChatCompletionMessageParam] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(
        _message(message, reasoning_in_tool_loop=reasoning_in_tool_loop)
        for message in request.messages
    )
    return messages


def _message(
    message: RequestMessage, *, reasoning_in_tool_loop: bool
) -> ChatCompletionMessageParam:
    if message.role == "assistant":
        return _assistant_message(message, reasoning_in_tool_loop=reasoning_in_tool_loop)
    if message.role == "tool":
        return _tool_message(message)
    return _user_message(message)


def _user_message(message: RequestMessage) -> ChatCompletionUserMessageParam:
    if not message.images:
        return {"role": "user", "content": message.content}
    parts: list[ChatCompletionContentPartParam] = [{"type": "text", "text": message.content}]
    for image in message.images:
        url = f"data:{image.media_type};base64,{image.data}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}


class _AssistantMessageWithReasoning(ChatCompletionAssistantMessageParam, total=False):
    """An assistant message with the step's reasoning, for vendors that want it back within a
    tool loop (`reasoning_in_tool_loop`)."""

    reasoning_content: str


def _assistant_message(
    message: RequestMessage, *, reasoning_in_tool_loop: bool
) -> ChatCompletionAssistantMessageParam:
    compiled: _AssistantMessageWithReasoning = {"role": "assistant"}
    # An assistant turn that only calls tools has null content; several vendors reject "".
    compiled["content"] = message.content or None
    if message.tool_calls:
        compiled["tool_calls"] = [_tool_call(call) for call in message.tool_calls]
        reasoning = "".join(block.text for block in message.thinking)
        if reasoning_in_tool_loop and reasoning:
            compiled["reasoning_content"] = reasoning
    return compiled


def _tool_call(call: ToolCall) -> ChatCompletionMessageFunctionToolCallParam:
    # A malformed call goes back as "{}": servers that render tools through a chat template
    # (vLLM, Ollama) parse these arguments and would reject the whole request. The tool
    # result already tells the model what was wrong.
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }


def _tool_message(message: RequestMessage) -> ChatCompletionToolMessageParam:
    # The protocol has no error flag for tool results, so the failure is said in the text.
    content = f"Error: {message.content}" if message.is_error else message.content
    return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content}


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
            self.usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
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
            self.usage = Usage(completion.usage.prompt_tokens, completion.usage.completion_tokens)
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


def _reasoning_text(delta: ChoiceDelta | ChatCompletionMessage) -> str:
    extra = delta.model_extra or {}
    for name in REASONING_FIELDS:
        value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return ""
