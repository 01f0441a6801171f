"""A fake Anthropic Messages server: `POST /v1/messages`, streamed (named SSE events, as the
SDK ignores unnamed ones) or plain JSON.

A thinking block is signed with a digest of its text, so a block sent back modified is caught.
With `requires_thinking_blocks`, a request that enables thinking is held to the real API's
rules (else 400 `invalid_request_error`): a budget of at least 1024 and below `max_tokens`, no
`temperature`, every thinking block's signature matching its text, and a request that answers
a tool_use step starting that step's assistant message with the step's thinking blocks,
unmodified. Off (the default), thinking in requests is not looked at.

Prompt caching is simulated as Anthropic does it (see `prompt_cache`), over blocks in prefix
order: each tool, each system text block (a string is one), each message's content blocks (a
string is one text block). A block with `cache_control` (`{"type": "ephemeral"}`, optionally
`"ttl": "5m"` or `"1h"`; at most 4, else 400) is a breakpoint. A block's tokens are the words of
its JSON as `count_words` counts them, `cache_control` aside; a tool definition shapes the
prefix but counts 0, as `input_tokens` never counted tools. Usage splits the prompt into
`cache_read_input_tokens`, `cache_creation_input_tokens` and the rest, `input_tokens`; each
call's split is logged in `cache_log`. `prompt_cache=False` reads and writes nothing.

Standalone: `python -m tests.fakes.anthropic_server --port 18081` serves default replies forever.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import (
    Answer,
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
from .prompt_cache import (
    Block,
    BreakpointCache,
    CacheOutcome,
    identity_of,
    without_cache_control,
)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

Event = tuple[str, dict[str, Any]]
MAX_BREAKPOINTS = 4
CACHE_TTLS = ("5m", "1h")
MISSING_THINKING = (
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found"
    " `{found}`. When `thinking` is enabled, a final `assistant` message must start with a"
    " thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks)."
)


def signature_of(thinking: str) -> str:
    """The signature this server gives a thinking block: a digest of its text."""
    return "sig_" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


class FakeAnthropicServer(FakeServer):
    label = "anthropic"

    def __init__(
        self,
        *,
        requires_thinking_blocks: bool = False,
        prompt_cache: bool = True,
        cache_min_tokens: int = 1024,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.requires_thinking_blocks = requires_thinking_blocks
        self._cache = BreakpointCache(min_tokens=cache_min_tokens, is_enabled=prompt_cache)
        # The thinking blocks of the last tool_use step answered, as the next request must
        # send them back.
        self._tool_step_thinking: list[dict[str, Any]] = []

    @property
    def cache_log(self) -> list[CacheOutcome]:
        """One outcome per answered model call, in order."""
        return self._cache.log

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        if request.method == "POST" and request.path == "/v1/messages":
            body = request.body or {}
            problem = _cache_control_problem(body) or self._thinking_problem(body)
            if problem is not None:
                await reply.json(400, self.error_body(HttpError(400, problem)))
                return
            await self.answer_call(request, reply)
        else:
            error = HttpError(404, f"no route for {request.method} {request.path}")
            await reply.json(404, self.error_body(error))

    def unknown_model(self, model: str) -> HttpError:
        return HttpError(404, f"model: {model}", error_type="not_found_error")

    def error_body(self, error: HttpError) -> object:
        default_type = "api_error" if error.status >= 500 else "invalid_request_error"
        kind = error.error_type or ERROR_TYPES.get(error.status, default_type)
        return {"type": "error", "error": {"type": kind, "message": error.message}}

    def _thinking_problem(self, body: dict[str, Any]) -> str | None:
        """What the real API would refuse in a request with thinking on, or None."""
        thinking = body.get("thinking") or {}
        if not self.requires_thinking_blocks or thinking.get("type") != "enabled":
            return None
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= body.get("max_tokens", 0):
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if "temperature" in body:
            return "`temperature` may only be set to 1 when thinking is enabled"
        messages = body.get("messages", [])
        for index, message in enumerate(messages):
            for position, block in enumerate(_content(message)):
                text = block.get("thinking", "")
                if block.get("type") == "thinking" and block.get("signature") != signature_of(text):
                    return f"messages.{index}.content.{position}: Invalid `signature` in block"
        if len(messages) < 2 or not any(
            block.get("type") == "tool_result" for block in _content(messages[-1])
        ):
            return None  # not the continuation of a tool loop
        index = len(messages) - 2
        content = _content(messages[index])
        expected = self._tool_step_thinking
        if [_thinking_key(b) for b in content[: len(expected)]] != [
            _thinking_key(b) for b in expected
        ]:
            found = content[0].get("type", "nothing") if content else "nothing"
            return MISSING_THINKING.format(index=index, found=found)
        return None

    async def answer(self, step: Answer, request: RecordedRequest, reply: Reply) -> None:
        body = request.body or {}
        outcome = self._cache.serve(str(body.get("model")), _cache_blocks(body))
        self._tool_step_thinking = _thinking_content(step) if isinstance(step, ToolCalls) else []
        if isinstance(step, Shapeless):  # a stream whose events parse but carry no message
            await reply.start_stream()
            await reply.send(f"event: message_start\ndata: {json.dumps(step.body)}\n\n")
            await reply.send('event: message_stop\ndata: {"type": "message_stop"}\n\n')
            await reply.end_stream()
            return
        if not body.get("stream"):
            await reply.json(200, _message(step, body, outcome), {"request-id": "req_fake"})
            return
        await reply.start_stream({"request-id": "req_fake"})
        for name, data in _events(step, body, outcome):
            await reply.send(f"event: {name}\ndata: {json.dumps(data)}\n\n")
            if isinstance(step, Text):
                await step.pause()
        if isinstance(step, StreamCut):
            reply.cut()
        else:
            await reply.end_stream()


def _events(step: Answer, body: dict[str, Any], outcome: CacheOutcome) -> list[Event]:
    """The SSE events of one reply; a cut reply stops after a few text deltas, an in-stream
    error ends with an `error` event instead of `message_stop`."""
    start = _message_start(body, outcome)
    events: list[Event] = [("message_start", start), ("ping", {"type": "ping"})]
    if isinstance(step, StreamCut):
        sent = [_text_delta(0, piece) for piece in words(step.text)[: step.sent_words]]
        return [*events, _block_start(0, {"type": "text", "text": ""}), *sent]
    for index, (start, deltas) in enumerate(_blocks(step)):
        events += [_block_start(index, start), *(_with_index(index, d) for d in deltas)]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if isinstance(step, StreamError):
        error = {"type": "error", "error": {"type": step.error_type, "message": step.message}}
        return [*events, ("error", error)]
    reason = "tool_use" if isinstance(step, ToolCalls) else "end_turn"
    usage = {"output_tokens": _output_words(step)}
    delta = {"stop_reason": reason, "stop_sequence": None}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    return [*events, ("message_stop", {"type": "message_stop"})]


def _blocks(step: Answer) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each content block as its start payload and its deltas."""
    if isinstance(step, Empty | StreamCut | Shapeless):
        return []
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for block in _thinking_content(step):
        if block["type"] == "redacted_thinking":  # arrives whole, in its start event
            blocks.append((block, []))
            continue
        thinking = [{"type": "thinking_delta", "thinking": p} for p in words(block["thinking"])]
        signature = [{"type": "signature_delta", "signature": block["signature"]}]
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, thinking + signature))
    if step.text:
        text = [{"type": "text_delta", "text": piece} for piece in words(step.text)]
        blocks.append(({"type": "text", "text": ""}, text))
    for index, call in enumerate(step.calls if isinstance(step, ToolCalls) else ()):
        start = {"type": "tool_use", "id": call.id or f"toolu_fake_{index}", "name": call.name}
        arguments = call.arguments_json()
        half = len(arguments) // 2  # the real API sends the input JSON in pieces
        pieces = [p for p in (arguments[:half], arguments[half:]) if p]
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        blocks.append(({**start, "input": {}}, deltas))
    return blocks


def _thinking_content(step: Answer) -> list[dict[str, Any]]:
    """The thinking blocks of a reply, whole, as the API returns them and wants them back."""
    if not isinstance(step, Text | ToolCalls):
        return []
    blocks: list[dict[str, Any]] = []
    if step.thinking:
        signature = signature_of(step.thinking)
        blocks.append({"type": "thinking", "thinking": step.thinking, "signature": signature})
    if isinstance(step, ToolCalls) and step.redacted_thinking:
        blocks.append({"type": "redacted_thinking", "data": step.redacted_thinking})
    return blocks


def _thinking_key(block: dict[str, Any]) -> tuple[object, ...]:
    return (block.get("type"), block.get("thinking"), block.get("signature"), block.get("data"))


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return (
        [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    )


def _message_start(body: dict[str, Any], outcome: CacheOutcome) -> dict[str, Any]:
    message = _envelope(body, content=[], stop_reason=None)
    message["usage"] = _usage(outcome, output_tokens=1)
    return {"type": "message_start", "message": message}


def _usage(outcome: CacheOutcome, *, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": outcome.uncached_tokens,
        "cache_creation_input_tokens": outcome.written_tokens,
        "cache_read_input_tokens": outcome.read_tokens,
        "output_tokens": output_tokens,
    }


# ---- the cacheable prefix ----------------------------------------------------------------------


def _placed_blocks(body: dict[str, Any]) -> list[tuple[str, str, object]]:
    """Each block in prefix order (tools, system, messages) with its path, for errors, and its
    place, for its identity: a message block's place is its role."""
    placed: list[tuple[str, str, object]] = [
        (f"tools.{index}", "tools", tool) for index, tool in enumerate(body.get("tools") or [])
    ]
    placed += [
        (f"system.{index}", "system", block)
        for index, block in enumerate(_as_blocks(body.get("system")))
    ]
    for index, message in enumerate(body.get("messages", [])):
        role = str(message.get("role"))
        blocks = _as_blocks(message.get("content"))
        placed += [(f"messages.{index}.content.{j}", role, b) for j, b in enumerate(blocks)]
    return placed


def _as_blocks(content: object) -> list[object]:
    """Content as blocks: a string is one text block, as the API reads it."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return content
    return [] if content is None else [content]


def _control_of(block: object) -> object:
    return block.get("cache_control") if isinstance(block, dict) else None


def _cache_blocks(body: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = []
    for _path, place, block in _placed_blocks(body):
        tokens = 0 if place == "tools" else count_words(without_cache_control(block))
        blocks.append(Block(identity_of(place, block), tokens, _control_of(block) is not None))
    return blocks


def _cache_control_problem(body: dict[str, Any]) -> str | None:
    """What the real API refuses about `cache_control` markers, or None."""
    placed = _placed_blocks(body)
    marked = [(path, _control_of(b)) for path, _, b in placed if _control_of(b) is not None]
    for path, control in marked:
        if not isinstance(control, dict):
            return f"{path}.cache_control: Input should be a valid dictionary"
        if control.get("type") != "ephemeral":
            return f"{path}.cache_control.type: Input should be 'ephemeral'"
        if control.get("ttl", "5m") not in CACHE_TTLS:
            return f"{path}.cache_control.ttl: Input should be '5m' or '1h'"
    if len(marked) > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided."
            f" Found {len(marked)}."
        )
    return None


def _block_start(index: int, block: dict[str, Any]) -> Event:
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def _text_delta(index: int, text: str) -> Event:
    return _with_index(index, {"type": "text_delta", "text": text})


def _with_index(index: int, delta: dict[str, Any]) -> Event:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def _envelope(
    body: dict[str, Any], *, content: list[Any], stop_reason: str | None
) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
    }


def _output_words(step: Answer) -> int:
    if isinstance(step, Empty | StreamCut | Shapeless):
        return 0
    calls = step.calls if isinstance(step, ToolCalls) else ()
    return count_words(step.text) + sum(count_words(c.arguments_json()) for c in calls)


def _message(step: Answer, body: dict[str, Any], outcome: CacheOutcome) -> dict[str, Any]:
    """A non-streamed message; a cut or failing stream answers as if complete."""
    content: list[dict[str, Any]] = _thinking_content(step)
    text = "" if isinstance(step, Empty | Shapeless) else step.text
    if text:
        content.append({"type": "text", "text": text})
    for index, call in enumerate(step.calls if isinstance(step, ToolCalls) else ()):
        arguments = call.arguments if not isinstance(call.arguments, str) else {}
        content.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_fake_{index}",
                "name": call.name,
                "input": dict(arguments),
            }
        )
    reason = "tool_use" if isinstance(step, ToolCalls) else "end_turn"
    message = _envelope(body, content=content, stop_reason=reason)
    message["usage"] = _usage(outcome, output_tokens=_output_words(step))
    return message


if __name__ == "__main__":
    serve_forever(FakeAnthropicServer(port=18081), "A fake Anthropic Messages server.")
