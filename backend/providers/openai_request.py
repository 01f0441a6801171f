"""Our request as a Chat Completions body: plain JSON shaped by the SDK's TypedDicts.

Built as plain JSON and posted through the SDK client as is: `completions.create` would re-walk
every message against its TypedDicts on each call, which cost more CPU than the rest of a turn's
request handling.
"""

from __future__ import annotations

import json

from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)

from backend.domain.messages import ToolCall
from backend.domain.requests import ChatRequest, RequestMessage, ToolSpec


def request_body(
    request: ChatRequest, *, reasoning_in_tool_loop: bool = False, prompt_cache_key: bool = False
) -> dict[str, object]:
    """The JSON body of a Chat Completions call; with `prompt_cache_key`, the request's cache key
    goes as that field (OpenAI's; a vendor that refuses unknown fields would reject it)."""
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
    if prompt_cache_key and request.cache_key is not None:
        body["prompt_cache_key"] = request.cache_key
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
    # The turn's context follows the text in the same string: OpenAI caches by token prefix,
    # and every vendor takes a string, while some reject a list of text parts.
    text = f"{message.content}\n\n{message.context}" if message.context else message.content
    if not message.images:
        return {"role": "user", "content": text}
    parts: list[ChatCompletionContentPartParam] = [{"type": "text", "text": text}]
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
    # The protocol has no error flag for tool results, so the failure is said in the text,
    # once: the registry's own errors already begin with "error:".
    is_unsaid = message.is_error and not message.content.lower().startswith("error")
    content = f"Error: {message.content}" if is_unsaid else message.content
    return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content}
