"""Chat routes: one turn (`POST /api/chat/send`, JSON or SSE) and cancel."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, StreamingResponse

from backend.api.auth import ChatTenantDep, TenantDep
from backend.api.deps import ServicesDep
from backend.api.revocation import KeyWatchDep, events_until_revoked, result_unless_revoked
from backend.api.schemas import (
    CancelResponse,
    ErrorBody,
    SendRequest,
    SendResponse,
    ToolCallPublic,
    UsagePublic,
)
from backend.api.sse import encode_event
from backend.api.turn_http import event_stream, failure_response
from backend.api.user_input import to_user_input
from backend.domain.events import TurnCompleted, TurnEvent, TurnFailed
from backend.domain.inbound import InboundMessage

router = APIRouter(prefix="/api/chat", tags=["chat"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)]


@router.post(
    "/send",
    response_model=SendResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "JSON, or SSE with stream"},
        404: {"model": ErrorBody},
        422: {"model": ErrorBody},
        502: {"model": ErrorBody},
    },
)
async def send(
    body: SendRequest,
    services: ServicesDep,
    tenant_id: ChatTenantDep,
    watch: KeyWatchDep,
    idempotency_key: IdempotencyKey = None,
) -> SendResponse | StreamingResponse | JSONResponse:
    handle = await services.chat.start(
        InboundMessage(
            tenant_id=tenant_id,
            channel="api",
            user_input=to_user_input(body.message),
            session_id=body.session_id,  # the turn reads it, under its lock: 404 if unknown
            idempotency_key=idempotency_key,
            stream=body.stream,
        )
    )
    if body.stream:
        events = events_until_revoked(handle, watch)
        # Wait for the turn to start, so a refusal (unknown session, quota) is an HTTP error.
        first = await anext(events)
        if isinstance(first, TurnFailed):
            await events.aclose()
            return failure_response(first)
        keepalive_s = services.settings.server.sse_keepalive_s
        return event_stream(handle, _encoded(first, events), keepalive_s=keepalive_s)
    end = await result_unless_revoked(handle, watch)
    return failure_response(end) if isinstance(end, TurnFailed) else _send_response(end)


def _send_response(end: TurnCompleted) -> SendResponse:
    return SendResponse(
        session_id=end.session_id,
        turn_id=end.turn_id,
        reply=end.reply,
        user_message_id=end.user_message_id,
        assistant_message_id=end.assistant_message_id,
        tool_calls=[
            ToolCallPublic(
                tool_call_id=c.tool_call_id,
                tool_name=c.tool_name,
                arguments=c.arguments,
                result=c.result,
                is_error=c.is_error,
                duration_ms=c.duration_ms,
            )
            for c in end.tool_calls
        ],
        usage=UsagePublic(
            prompt_tokens=end.usage.prompt_tokens, completion_tokens=end.usage.completion_tokens
        ),
        context_tokens=end.context_tokens,
        context_budget=end.context_budget,
    )


async def _encoded(
    first: TurnEvent, events: AsyncGenerator[TurnEvent, None]
) -> AsyncGenerator[bytes, None]:
    try:
        yield encode_event(first)
        async for event in events:
            yield encode_event(event)
    finally:
        await events.aclose()  # events_until_revoked's key watch with it


@router.post("/sessions/{session_id}/cancel")
async def cancel(session_id: str, services: ServicesDep, tenant_id: TenantDep) -> CancelResponse:
    await services.sessions.get(tenant_id=tenant_id, session_id=session_id)
    return CancelResponse(
        cancelled=await services.chat.cancel(tenant_id=tenant_id, session_id=session_id)
    )
