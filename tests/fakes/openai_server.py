"""A fake OpenAI-compatible server: `POST /v1/chat/completions` (streamed or not) and
`GET /v1/models`.

Vendors differ on reasoning sent back in requests, and `reasoning_rule` plays each: "ignored"
(the default) looks at nothing; "required" (DeepSeek thinking mode, Kimi) answers 400 to an
assistant tool-call message of the current turn without `reasoning_content`; "forbidden"
(OpenAI, DeepSeek's older reasoner) answers 400 to any message carrying it.

Standalone: `python -m tests.fakes.openai_server --port 18080` serves default replies forever.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any, Literal

from . import (
    Answer,
    Call,
    Empty,
    FakeServer,
    HttpError,
    RecordedRequest,
    Reply,
    Shapeless,
    StreamCut,
    StreamError,
    Text,
    ToolCalls,
    count_words,
    serve_forever,
    words,
)

MODELS = ("fake-model", "fake-model-mini")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}
ReasoningRule = Literal["ignored", "required", "forbidden"]


class FakeOpenAIServer(FakeServer):
    label = "openai"

    def __init__(self, *, reasoning_rule: ReasoningRule = "ignored", **options: Any) -> None:
        super().__init__(**options)
        self.reasoning_rule = reasoning_rule

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/v1"

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        if request.method == "GET" and request.path == "/v1/models":
            models = [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in MODELS
            ]
            await reply.json(200, {"object": "list", "data": models})
        elif request.method == "POST" and request.path == "/v1/chat/completions":
            problem = _reasoning_problem(request.body or {}, self.reasoning_rule)
            if problem is not None:
                await reply.json(400, self.error_body(HttpError(400, problem)))
                return
            await self.answer_call(request, reply)
        else:
            error = HttpError(404, f"no route for {request.method} {request.path}")
            await reply.json(404, self.error_body(error))

    def unknown_model(self, model: str) -> HttpError:
        message = f"The model `{model}` does not exist or you do not have access to it."
        return HttpError(404, message, error_type="model_not_found")

    def error_body(self, error: HttpError) -> object:
        default_type = "server_error" if error.status >= 500 else "invalid_request_error"
        kind = error.error_type or ERROR_TYPES.get(error.status, default_type)
        return {"error": {"message": error.message, "type": kind, "param": None, "code": kind}}

    async def answer(self, step: Answer, request: RecordedRequest, reply: Reply) -> None:
        body = request.body or {}
        if isinstance(step, Shapeless):
            await _shapeless(step, streamed=bool(body.get("stream")), reply=reply)
            return
        if not body.get("stream"):
            await reply.json(200, _completion(step, body), {"x-request-id": "req_fake"})
            return
        chunks = _Chunks(body)
        await reply.start_stream({"x-request-id": "req_fake"})
        await reply.send(chunks.sse({"role": "assistant", "content": ""}))
        if isinstance(step, StreamCut):
            for piece in words(step.text)[: step.sent_words]:
                await reply.send(chunks.sse({"content": piece}))
            reply.cut()
            return
        for delta in _deltas(step):
            await reply.send(chunks.sse(delta))
            if isinstance(step, Text):
                await step.pause()
        if isinstance(step, StreamError):
            error = {"error": {"message": step.message, "type": step.error_type, "code": None}}
            await reply.send(f"data: {json.dumps(error)}\n\n")
        else:
            reason = "tool_calls" if isinstance(step, ToolCalls) else "stop"
            await reply.send(chunks.sse({}, finish_reason=reason))
            if (body.get("stream_options") or {}).get("include_usage"):
                await reply.send(chunks.usage_sse(_output_words(step)))
        await reply.send("data: [DONE]\n\n")
        await reply.end_stream()


def _reasoning_problem(body: dict[str, Any], rule: ReasoningRule) -> str | None:
    """What a vendor with `rule` would refuse about reasoning in the request, or None."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    if rule == "forbidden":
        for index, message in enumerate(messages):
            if "reasoning_content" in message:
                return f"messages[{index}]: unrecognized field `reasoning_content`"
    if rule == "required":
        users = [index for index, message in enumerate(messages) if message.get("role") == "user"]
        turn_start = users[-1] + 1 if users else 0
        for index, message in enumerate(messages[turn_start:], start=turn_start):
            if message.get("tool_calls") and not message.get("reasoning_content"):
                return (
                    "Missing `reasoning_content` field in the assistant message at message"
                    f" index {index}: it must be passed back within a tool-calling turn"
                )
    return None


async def _shapeless(step: Shapeless, *, streamed: bool, reply: Reply) -> None:
    if not streamed:
        await reply.json(200, step.body)
        return
    await reply.start_stream()
    await reply.send(f"data: {json.dumps(step.body)}\n\n")
    await reply.send("data: [DONE]\n\n")
    await reply.end_stream()


def _deltas(step: Answer) -> list[dict[str, Any]]:
    """The streamed deltas of a complete reply, without the role and finish chunks."""
    deltas: list[dict[str, Any]] = []
    if isinstance(step, Text | ToolCalls) and step.thinking:
        deltas += [{"reasoning_content": piece} for piece in words(step.thinking)]
    text = "" if isinstance(step, Empty) else step.text
    deltas += [{"content": piece} for piece in words(text)]
    if isinstance(step, ToolCalls):
        for index, call in enumerate(step.calls):
            deltas += _tool_call_deltas(index, call)
    return deltas


def _tool_call_deltas(index: int, call: Call) -> list[dict[str, Any]]:
    opening = {
        "index": index,
        "id": call.id or f"call_fake_{index}",
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }
    arguments = call.arguments_json()
    # Arguments arrive in pieces on the real API; three uneven pieces exercise reassembly.
    cuts = [0, len(arguments) // 3, 2 * len(arguments) // 3, len(arguments)]
    pieces = [arguments[a:b] for a, b in itertools.pairwise(cuts) if arguments[a:b]]
    return [{"tool_calls": [opening]}] + [
        {"tool_calls": [{"index": index, "function": {"arguments": piece}}]} for piece in pieces
    ]


class _Chunks:
    """Builds `chat.completion.chunk` SSE lines sharing one id, model and timestamp."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", MODELS[0]),
        }
        self.prompt_tokens = _prompt_words(body)

    def sse(self, delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return f"data: {json.dumps({**self.base, 'choices': [choice]})}\n\n"

    def usage_sse(self, completion_tokens: int) -> str:
        usage = _usage(self.prompt_tokens, completion_tokens)
        return f"data: {json.dumps({**self.base, 'choices': [], 'usage': usage})}\n\n"


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _prompt_words(body: dict[str, Any]) -> int:
    return count_words([message.get("content") for message in body.get("messages", [])])


def _output_words(step: Answer) -> int:
    if isinstance(step, Empty | StreamCut):
        return 0
    calls = step.calls if isinstance(step, ToolCalls) else ()
    return count_words(step.text) + sum(count_words(c.arguments_json()) for c in calls)


def _completion(step: Answer, body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed `chat.completion`; a cut or failing stream answers as if complete."""
    text = "" if isinstance(step, Empty) else step.text
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if isinstance(step, ToolCalls):
        message["tool_calls"] = [
            {
                "id": call.id or f"call_fake_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for index, call in enumerate(step.calls)
        ]
    if isinstance(step, Text | ToolCalls) and step.thinking:
        message["reasoning_content"] = step.thinking
    reason = "tool_calls" if isinstance(step, ToolCalls) else "stop"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", MODELS[0]),
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": _usage(_prompt_words(body), _output_words(step)),
    }


if __name__ == "__main__":
    serve_forever(FakeOpenAIServer(port=18080), "A fake OpenAI-compatible server.")
