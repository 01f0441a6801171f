"""The OpenAI-compatible facade: `POST /v1/chat/completions` and `GET /v1/models`.

Any OpenAI client (the official SDKs, tools that take a `base_url`) talks to Tally with memory:

- The session is named by the `X-Tally-Session` header, else by the request's `user` field
  (channel `openai`, that value as its external key; `user` also becomes the session's
  `user_key`, so `memory.scope: user` keeps end users apart). With neither: 400
  `session_required`. Sessions are per tenant: the same name under another tenant's key is
  another session.
- Only the newest message of `messages` is used, and it must be a user message (else 400
  `last_message_not_user`). Tally supplies the history, the system prompt and memory from what
  it stored, so the caller's earlier messages and system messages are ignored.
- `model` is accepted and echoed back; the tenant's configured model answers. Sampling
  parameters are ignored. Tally's own tools run inside the turn and the caller sees only the
  final text; client-side tools (`tools`, `tool_choice`, `functions`, `function_call`) are
  refused with 400 `tools_not_supported`, since ignoring them would fail silently (an empty
  list or `"none"` asks for no tools and passes).
- Errors keep Tally's body, `{"error": {"code", "message"}}`, plus OpenAI's `type`, so OpenAI
  SDKs raise their usual exceptions with Tally's message and code. A streamed reply commits to
  HTTP 200 when the model starts answering; a failure before that is a plain HTTP error, a
  failure after it is a final `data: {"error": ...}` chunk followed by `data: [DONE]`.
- The response carries `X-Tally-Session-Id`, the session's id in the rest of the API.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import TypeAdapter, ValidationError

from backend.api.auth import ChatTenantDep, TenantDep
from backend.api.chat import IdempotencyKey
from backend.api.deps import ServicesDep
from backend.api.json_response import json_bytes
from backend.api.openai_errors import OpenAIErrorRoute, error_type
from backend.api.openai_schemas import (
    AssistantMessageOut,
    ChatCompletion,
    ChatCompletionChoice,
    ChatCompletionChunk,
    ChatCompletionChunkChoice,
    ChatCompletionRequest,
    ChatMessageIn,
    CompletionUsage,
    ModelCard,
    ModelList,
    OpenAIContentPartIn,
    OpenAIImagePartIn,
    PromptTokensDetails,
)
from backend.api.revocation import KeyWatchDep, events_until_revoked, result_unless_revoked
from backend.api.schemas import ContentPartIn, ErrorBody, ImagePartIn, TextPartIn
from backend.api.turn_http import event_stream, failure_response, open_turn, opened_events
from backend.api.user_input import to_user_input
from backend.chat.turn_handle import TurnHandle
from backend.domain.events import (
    TextDelta,
    ThinkingDelta,
    ToolStarted,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
)
from backend.domain.inbound import InboundMessage
from backend.domain.messages import Usage, UserInput
from backend.errors import InvalidInput, TallyError

CHANNEL = "openai"
SESSION_HEADER = "X-Tally-Session"
SESSION_ID_HEADER = "X-Tally-Session-Id"
DATA_URL_PREFIX = "data:"

COMPLETIONS_DESCRIPTION = (
    "OpenAI Chat Completions with Tally's memory. The session comes from the X-Tally-Session "
    "header, else the `user` field. Only the newest message is used and it must be a user "
    "message: Tally supplies the history, system prompt and memory itself, so earlier and "
    "system messages in `messages` are ignored. `model` is echoed back; the tenant's "
    "configured model answers. With `stream: true` the reply is OpenAI's chunk stream. "
    "Client-side tools are not supported yet: a request with `tools`, `tool_choice`, "
    "`functions` or `function_call` is refused with 400 tools_not_supported."
)


class BadFacadeRequest(TallyError):
    code = "invalid_request"
    status = 400


router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIErrorRoute)

SessionName = Annotated[str | None, Header(alias=SESSION_HEADER, min_length=1, max_length=200)]


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    description=COMPLETIONS_DESCRIPTION,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "JSON, or SSE with stream"},
        400: {"model": ErrorBody},
        401: {"model": ErrorBody},
        422: {"model": ErrorBody},
        503: {"model": ErrorBody},
    },
)
async def create_chat_completion(
    body: ChatCompletionRequest,
    services: ServicesDep,
    tenant_id: ChatTenantDep,
    response: Response,
    watch: KeyWatchDep,
    session_name: SessionName = None,
    idempotency_key: IdempotencyKey = None,
) -> ChatCompletion | StreamingResponse | JSONResponse:
    _refuse_client_tools(body)
    handle = await services.chat.start(
        InboundMessage(
            tenant_id=tenant_id,
            channel=CHANNEL,
            user_input=_newest_user_input(body.messages),
            external_key=_session_name(session_name, body.user),
            user_key=body.user,
            idempotency_key=idempotency_key,
        )
    )
    headers = {SESSION_ID_HEADER: handle.request.session_id}
    if body.stream:
        is_usage_wanted = body.stream_options is not None and body.stream_options.include_usage
        events = events_until_revoked(handle, watch)
        return await _stream(
            handle,
            events,
            body.model,
            headers,
            is_usage_wanted=is_usage_wanted,
            keepalive_s=services.settings.server.sse_keepalive_s,
        )
    end = await result_unless_revoked(handle, watch)
    if isinstance(end, TurnFailed):
        return failure_response(end, headers)
    response.headers.update(headers)
    return ChatCompletion(
        id=f"chatcmpl-{end.turn_id}",
        created=int(time.time()),
        model=body.model,
        choices=[ChatCompletionChoice(message=AssistantMessageOut(content=end.reply))],
        usage=_usage(end.usage),
    )


@router.get("/models")
async def list_models(services: ServicesDep, tenant_id: TenantDep) -> ModelList:
    """The model that answers this tenant (whatever `model` a request names)."""
    runtime = await services.runtimes.get(tenant_id)
    return ModelList(data=[ModelCard(id=runtime.model.name)])


# ---- request -> turn ------------------------------------------------------------------------

_USER_CONTENT: TypeAdapter[str | list[OpenAIContentPartIn]] = TypeAdapter(
    str | list[OpenAIContentPartIn]
)


def _refuse_client_tools(body: ChatCompletionRequest) -> None:
    asked = {
        "tools": bool(body.tools),
        "tool_choice": body.tool_choice not in (None, "none"),
        "functions": bool(body.functions),
        "function_call": body.function_call not in (None, "none"),
    }
    sent = [f"`{name}`" for name, is_asked in asked.items() if is_asked]
    if sent:
        raise BadFacadeRequest(
            f"this request sends {', '.join(sent)}: Tally runs its own tools inside the turn, "
            "and client-side tools are not supported yet; send the request without them",
            code="tools_not_supported",
        )


def _newest_user_input(messages: list[ChatMessageIn]) -> UserInput:
    newest = messages[-1]
    if newest.role != "user":
        raise BadFacadeRequest(
            f"the last message must be a user message, not {newest.role!r}: Tally keeps the "
            "history itself and answers the newest user message",
            code="last_message_not_user",
        )
    try:
        content = _USER_CONTENT.validate_python(newest.content)
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise InvalidInput(
            f"the last message's content is not text or text and image_url parts: "
            f"{problem.get('msg', 'invalid')}",
            code="invalid_content",
        ) from exc
    if isinstance(content, str):
        return to_user_input(content)
    parts: list[ContentPartIn] = [
        _image(part)
        if isinstance(part, OpenAIImagePartIn)
        else TextPartIn(type="text", text=part.text)
        for part in content
    ]
    return to_user_input(parts)


def _image(part: OpenAIImagePartIn) -> ImagePartIn:
    """`data:<media type>;base64,<data>` into Tally's image part; remote URLs are refused (the
    server does not fetch URLs on a caller's behalf)."""
    url = part.image_url.url
    header, comma, data = url.partition(",")
    if not url.startswith(DATA_URL_PREFIX) or not comma or not header.endswith(";base64"):
        raise InvalidInput(
            "an image must be a base64 data: URL (data:image/png;base64,...)",
            code="unsupported_image_url",
        )
    media_type = header.removeprefix(DATA_URL_PREFIX).removesuffix(";base64")
    try:
        return ImagePartIn.model_validate({"type": "image", "media_type": media_type, "data": data})
    except ValidationError as exc:
        raise InvalidInput(
            f"unsupported image type {media_type!r}: use PNG, JPEG, GIF or WebP",
            code="invalid_image",
        ) from exc


def _session_name(session_name: str | None, user: str | None) -> str:
    """The conversation's name: the header, else `user`; this facade needs one."""
    name = session_name or user
    if name is None:
        raise BadFacadeRequest(
            f"this request names no session: send the header `{SESSION_HEADER}: <conversation "
            'name>` or the body field `"user": "<end user id>"`; Tally keeps the '
            "conversation's history under that name",
            code="session_required",
        )
    if not name.isprintable():
        raise BadFacadeRequest("the session name has control characters", code="invalid_session")
    return name


# ---- turn -> response -----------------------------------------------------------------------


def _usage(usage: Usage) -> CompletionUsage:
    return CompletionUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens),
    )


# The model has begun to answer: from here on the stream is committed to HTTP 200.
_OUTPUT = (TextDelta, ThinkingDelta, ToolStarted, TurnCompleted, TurnFailed)


async def _stream(
    handle: TurnHandle,
    events: AsyncGenerator[TurnEvent, None],
    model: str,
    headers: dict[str, str],
    *,
    is_usage_wanted: bool,
    keepalive_s: float,
) -> StreamingResponse | JSONResponse:
    # Wait for output, however long, so an early failure keeps its HTTP status (see turn_http).
    opening = await open_turn(events, commits=_is_output)
    if opening.refusal is not None:
        await events.aclose()
        return failure_response(opening.refusal, headers)
    chunks = _Chunks(f"chatcmpl-{handle.turn_id}", int(time.time()), model)
    body = _sse(opened_events(opening, events), chunks, is_usage_wanted=is_usage_wanted)
    # An OpenAI client never resumes a stream: one that goes away stops the model call.
    return event_stream(body, keepalive_s=keepalive_s, on_disconnect=handle.cancel, headers=headers)


def _is_output(event: TurnEvent) -> bool:
    return isinstance(event, _OUTPUT)


@dataclass(frozen=True, slots=True)
class _Chunks:
    """Encodes OpenAI's `chat.completion.chunk` SSE lines for one completion."""

    id: str
    created: int
    model: str

    def delta(self, delta: dict[str, str], *, is_last: bool = False) -> bytes:
        choice = ChatCompletionChunkChoice(delta=delta, finish_reason="stop" if is_last else None)
        return self._encode(choices=[choice])

    def usage(self, usage: Usage) -> bytes:
        return self._encode(choices=[], usage=_usage(usage))

    def _encode(self, **fields: Any) -> bytes:
        chunk = ChatCompletionChunk(id=self.id, created=self.created, model=self.model, **fields)
        return f"data: {chunk.model_dump_json()}\n\n".encode()


DONE = b"data: [DONE]\n\n"


def _error_chunk(end: TurnFailed) -> bytes:
    error = {"code": end.code, "message": end.message, "type": error_type(end.status)}
    return b"data: " + json_bytes({"error": error}) + b"\n\n"


async def _sse(
    events: AsyncGenerator[TurnEvent, None], chunks: _Chunks, *, is_usage_wanted: bool
) -> AsyncGenerator[bytes, None]:
    try:
        yield chunks.delta({"role": "assistant", "content": ""})
        async for event in events:
            if isinstance(event, TextDelta) and event.text:
                yield chunks.delta({"content": event.text})
            elif isinstance(event, TurnCompleted):
                yield chunks.delta({}, is_last=True)
                if is_usage_wanted:
                    yield chunks.usage(event.usage)
            elif isinstance(event, TurnFailed):
                yield _error_chunk(event)
        yield DONE
    finally:
        await events.aclose()
