"""Chat routes: one turn (`POST /api/chat/send`, JSON or SSE), resuming its stream after a
dropped connection (`GET /api/chat/turns/{turn_id}/events` with `Last-Event-ID`), a decision on
a tool call waiting for approval, and cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, StreamingResponse

from backend.api.auth import ChatTenantDep, TenantDep
from backend.api.deps import RelaysDep, ServicesDep
from backend.api.revocation import KeyWatchDep, events_until_revoked, result_unless_revoked
from backend.api.schemas import (
    ApprovalRequest,
    ApprovalResponse,
    CancelResponse,
    ErrorBody,
    SendRequest,
    SendResponse,
    ToolCallPublic,
    UsagePublic,
)
from backend.api.turn_http import event_stream, failure_response, open_turn, opened_events
from backend.api.user_input import to_user_input
from backend.domain.decisions import ToolDecision
from backend.domain.events import TurnCompleted, TurnEvent, TurnFailed
from backend.domain.inbound import InboundMessage
from backend.errors import NotFound

router = APIRouter(prefix="/api/chat", tags=["chat"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)]
LastEventId = Annotated[int, Header(alias="Last-Event-ID", ge=0, le=10**9)]


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
    relays: RelaysDep,
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
            can_approve=body.stream,  # a streaming client sees tool.approval and can answer
            user_key=body.user,
        )
    )
    if body.stream:
        keepalive_s = services.settings.server.sse_keepalive_s
        events = events_until_revoked(handle, watch)
        # A refusal (unknown session, quota) is an HTTP error; the stream commits at the first
        # event, or after a keep-alive's wait (see turn_http).
        opening = await open_turn(events, commits=_any_event, wait_s=keepalive_s)
        if opening.refusal is not None:
            await events.aclose()
            return failure_response(opening.refusal)
        turn_events = opened_events(opening, events)
        relay = relays.start(tenant_id, handle.turn_id, turn_events, handle.cancel)
        return event_stream(
            relay.follow(0),
            keepalive_s=keepalive_s,
            on_disconnect=lambda: relays.client_gone(relay),
        )
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
            prompt_tokens=end.usage.prompt_tokens,
            completion_tokens=end.usage.completion_tokens,
            cached_tokens=end.usage.cached_tokens,
            cache_write_tokens=end.usage.cache_write_tokens,
        ),
        context_tokens=end.context_tokens,
        context_budget=end.context_budget,
        memory_problem=end.memory_problem,
    )


def _any_event(event: TurnEvent) -> bool:
    return True


@router.get(
    "/turns/{turn_id}/events",
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "the turn's events after"},
        404: {"model": ErrorBody},
    },
)
async def resume(
    turn_id: str,
    services: ServicesDep,
    relays: RelaysDep,
    tenant_id: ChatTenantDep,
    last_event_id: LastEventId = 0,
) -> StreamingResponse:
    """The events of a streaming turn after the client's last (`Last-Event-ID`, the `id:` of
    the last event it read; none: from the start), as they come, until the turn's last; served
    by any process. 404 once the turn ended more than two minutes ago: read its messages."""
    relay = relays.find(tenant_id, turn_id)
    body = (
        relay.follow(last_event_id)
        if relay is not None
        else await relays.follow_elsewhere(tenant_id, turn_id, after=last_event_id)
    )
    if body is None:
        raise NotFound(
            "no stream of this turn to resume: it is unknown, or ended over two minutes ago; "
            "its messages are in the session",
            code="turn_not_found",
        )
    return event_stream(
        body, keepalive_s=services.settings.server.sse_keepalive_s, on_disconnect=_nothing
    )


def _nothing() -> None:
    """A reconnected reader going away stops nothing: the turn's own client decides."""


@router.post(
    "/turns/{turn_id}/approvals",
    responses={404: {"model": ErrorBody}, 422: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
async def decide(
    turn_id: str, body: ApprovalRequest, services: ServicesDep, tenant_id: ChatTenantDep
) -> ApprovalResponse:
    """Approve or deny a tool call the turn's `tool.approval` event asked about, on any
    process. A denied call never runs; the model is told either way. Only JSON `true`
    approves.

    Who may decide is the tenant's app's call: any of the tenant's keys decides any of its
    waiting calls, given the turn and call ids (which only the turn's stream carries). An app
    that serves several people shows each call only to the person whose turn it is, and
    answers for them; it never forwards another's ids."""
    applied = await services.chat.decide(
        ToolDecision(tenant_id, turn_id, body.tool_call_id, approved=body.approved)
    )
    if not applied:
        raise NotFound(
            "no tool call of this turn waits for a decision under that id: it was answered, "
            "its time ran out, or the turn is unknown",
            code="approval_not_found",
        )
    return ApprovalResponse(tool_call_id=body.tool_call_id, approved=body.approved)


@router.post("/sessions/{session_id}/cancel")
async def cancel(session_id: str, services: ServicesDep, tenant_id: TenantDep) -> CancelResponse:
    await services.sessions.get(tenant_id=tenant_id, session_id=session_id)
    return CancelResponse(
        cancelled=await services.chat.cancel(tenant_id=tenant_id, session_id=session_id)
    )
