"""A fake OpenAI-compatible server: `POST /v1/chat/completions` (streamed or not),
`POST /v1/embeddings` and `GET /v1/models`.

Embeddings are a bag of words hashed into `dimensions` (64 by default), so texts that share
words are near and others are not; `embeddings_status` set to an error status fails them.

Vendors differ on reasoning sent back in requests, and `reasoning_rule` plays each: "ignored"
(the default) looks at nothing; "required" (DeepSeek thinking mode, Kimi) answers 400 to an
assistant tool-call message of the current turn without `reasoning_content`; "forbidden"
(OpenAI, DeepSeek's older reasoner) answers 400 to any message carrying it.

Prompt caching is simulated as OpenAI does it, automatically (see `prompt_cache`): the prompt is
the tools, then each message's role, content and other fields; a call reads the longest prefix
it shares with an earlier call of the same model and `prompt_cache_key` (absent: one shared
pool), reported as `usage.prompt_tokens_details.cached_tokens` and logged in `cache_log`. With
`prompt_cache=False` the field is left out, as from a vendor that does not cache.

Standalone: `python -m tests.fakes.openai_server --port 18080` serves default replies forever.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import struct
import time
import zlib
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
from .prompt_cache import CacheOutcome, PrefixCache, Token, tokens_of

MODELS = ("fake-model", "fake-model-mini")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}
ReasoningRule = Literal["ignored", "required", "forbidden"]
JSON_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a decimal", list: "an array"}


class FakeOpenAIServer(FakeServer):
    label = "openai"

    def __init__(
        self,
        *,
        reasoning_rule: ReasoningRule = "ignored",
        prompt_cache: bool = True,
        cache_min_tokens: int = 1024,
        cache_increment: int = 128,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.reasoning_rule = reasoning_rule
        self.embeddings_status = 200
        self._cache = PrefixCache(
            min_tokens=cache_min_tokens, increment=cache_increment, is_enabled=prompt_cache
        )

    @property
    def cache_log(self) -> list[CacheOutcome]:
        """One outcome per answered model call, in order."""
        return self._cache.log

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
            key_error = _cache_key_error(request.body or {})
            if key_error is not None:
                await reply.json(400, key_error)
                return
            problem = _reasoning_problem(request.body or {}, self.reasoning_rule)
            if problem is not None:
                await reply.json(400, self.error_body(HttpError(400, problem)))
                return
            await self.answer_call(request, reply)
        elif request.method == "POST" and request.path == "/v1/embeddings":
            await self._embeddings(request.body or {}, reply)
        else:
            error = HttpError(404, f"no route for {request.method} {request.path}")
            await reply.json(404, self.error_body(error))

    async def _embeddings(self, body: dict[str, Any], reply: Reply) -> None:
        if self.embeddings_status != 200:
            error = HttpError(self.embeddings_status, "embeddings are down")
            await reply.json(self.embeddings_status, self.error_body(error))
            return
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dimensions = int(body.get("dimensions") or 64)
        data = []
        for index, text in enumerate(texts):
            vector = bag_of_words(str(text), dimensions)
            encoded: object = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        words_in = sum(count_words(str(text)) for text in texts)
        usage = {"prompt_tokens": words_in, "total_tokens": words_in}
        await reply.json(
            200, {"object": "list", "data": data, "model": body["model"], "usage": usage}
        )

    def unknown_model(self, model: str) -> HttpError:
        message = f"The model `{model}` does not exist or you do not have access to it."
        return HttpError(404, message, error_type="model_not_found")

    def error_body(self, error: HttpError) -> object:
        default_type = "server_error" if error.status >= 500 else "invalid_request_error"
        kind = error.error_type or ERROR_TYPES.get(error.status, default_type)
        return {"error": {"message": error.message, "type": kind, "param": None, "code": kind}}

    async def answer(self, step: Answer, request: RecordedRequest, reply: Reply) -> None:
        body = request.body or {}
        cached = self._cached_tokens(body)
        if isinstance(step, Shapeless):
            await _shapeless(step, streamed=bool(body.get("stream")), reply=reply)
            return
        if not body.get("stream"):
            await reply.json(200, _completion(step, body, cached), {"x-request-id": "req_fake"})
            return
        chunks = _Chunks(body, cached)
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

    def _cached_tokens(self, body: dict[str, Any]) -> int | None:
        """The call's cached prompt tokens, or None when caching is not simulated."""
        pool = (body.get("prompt_cache_key"), str(body.get("model")))
        outcome = self._cache.serve(pool, _prompt_sequence(body))
        return outcome.read_tokens if self._cache.is_enabled else None


def bag_of_words(text: str, dimensions: int) -> list[float]:
    """Each word (lower case, a plural's s dropped) counted in the dimension its hash names."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.casefold()):
        word = word[:-1] if len(word) > 3 and word.endswith("s") else word
        vector[zlib.crc32(word.encode()) % dimensions] += 1.0
    return vector


def _prompt_sequence(body: dict[str, Any]) -> list[Token]:
    """The prompt as tokens in the order a model reads it; the billed ones are exactly the
    content words `_prompt_words` counts, so cached tokens never exceed prompt tokens."""
    tokens = tokens_of(body.get("tools") or [], is_billed=False)
    for message in body.get("messages", []):
        tokens.append((f"<|{message.get('role')}|>", 0))
        tokens += tokens_of(message.get("content"), is_billed=True)
        rest = {key: value for key, value in message.items() if key not in ("role", "content")}
        tokens += tokens_of(rest, is_billed=False)
    return tokens


def _cache_key_error(body: dict[str, Any]) -> dict[str, Any] | None:
    """OpenAI's 400 for a `prompt_cache_key` that is not a string (null means no key)."""
    key = body.get("prompt_cache_key")
    if key is None or isinstance(key, str):
        return None
    found = JSON_TYPE_NAMES.get(type(key), "an object")
    message = f"Invalid type for 'prompt_cache_key': expected a string, but got {found} instead."
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "prompt_cache_key",
            "code": "invalid_type",
        }
    }


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
    text = "" if isinstance(step, Empty | Shapeless) else step.text
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

    def __init__(self, body: dict[str, Any], cached_tokens: int | None) -> None:
        self.base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", MODELS[0]),
        }
        self.prompt_tokens = _prompt_words(body)
        self.cached_tokens = cached_tokens

    def sse(self, delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return f"data: {json.dumps({**self.base, 'choices': [choice]})}\n\n"

    def usage_sse(self, completion_tokens: int) -> str:
        usage = _usage(self.prompt_tokens, completion_tokens, self.cached_tokens)
        return f"data: {json.dumps({**self.base, 'choices': [], 'usage': usage})}\n\n"


def _usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return usage


def _prompt_words(body: dict[str, Any]) -> int:
    return count_words([message.get("content") for message in body.get("messages", [])])


def _output_words(step: Answer) -> int:
    if isinstance(step, Empty | StreamCut | Shapeless):
        return 0
    calls = step.calls if isinstance(step, ToolCalls) else ()
    return count_words(step.text) + sum(count_words(c.arguments_json()) for c in calls)


def _completion(step: Answer, body: dict[str, Any], cached_tokens: int | None) -> dict[str, Any]:
    """A non-streamed `chat.completion`; a cut or failing stream answers as if complete."""
    text = "" if isinstance(step, Empty | Shapeless) else step.text
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
        "usage": _usage(_prompt_words(body), _output_words(step), cached_tokens),
    }


if __name__ == "__main__":
    serve_forever(FakeOpenAIServer(port=18080), "A fake OpenAI-compatible server.")
