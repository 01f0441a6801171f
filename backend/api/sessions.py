"""Session routes: create, list, read, rename, delete, summary, messages, tool conversations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from backend.api.auth import TenantDep
from backend.api.deps import ServicesDep
from backend.api.schemas import (
    ImagePublic,
    MessageList,
    MessagePublic,
    SessionCreate,
    SessionList,
    SessionPublic,
    SessionUpdate,
    SummaryUpdate,
    ToolConversationList,
    ToolConversationPublic,
    TurnFailurePublic,
)
from backend.api.text_fields import Text
from backend.domain.messages import Session, StoredMessage

router = APIRouter(prefix="/api/chat/sessions", tags=["sessions"])
MAX_ID = 2**63 - 1  # ids are 64-bit in both databases


def session_public(session: Session) -> SessionPublic:
    return SessionPublic(
        id=session.id,
        title=session.title,
        channel=session.channel,
        user=session.user_key,
        summary=session.summary,
        window_start_id=session.window_start_id,
        created_at=session.created_at,
        updated_at=session.updated_at,
    )


def message_public(message: StoredMessage, *, window_start_id: int) -> MessagePublic:
    return MessagePublic(
        id=message.id,
        role=message.role,
        content=message.content,
        turn_id=message.turn_id,
        status=message.status,
        created_at=message.created_at,
        images=[ImagePublic(media_type=i.media_type, data=i.data) for i in message.images],
        is_archived=message.id < window_start_id,
        compacted=message.compacted,
        thinking=message.thinking,
        failure=failure_public(message),
        retry_key=message.idempotency_key if message.failure else None,
    )


def failure_public(message: StoredMessage) -> TurnFailurePublic | None:
    failure = message.failure
    return TurnFailurePublic(code=failure.code, message=failure.message) if failure else None


@router.post("", status_code=201)
async def create_session(
    body: SessionCreate, services: ServicesDep, tenant_id: TenantDep
) -> SessionPublic:
    session = await services.sessions.create(
        tenant_id=tenant_id, channel=body.channel, title=body.title.strip(), user_key=body.user
    )
    return session_public(session)


@router.get("")
async def list_sessions(
    services: ServicesDep,
    tenant_id: TenantDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    q: Annotated[Text | None, Query(max_length=200)] = None,
) -> SessionList:
    sessions, total = await services.sessions.list(
        tenant_id=tenant_id, limit=limit, offset=offset, query=q
    )
    return SessionList(sessions=[session_public(s) for s in sessions], total=total)


@router.get("/{session_id}")
async def read_session(
    session_id: str, services: ServicesDep, tenant_id: TenantDep
) -> SessionPublic:
    return session_public(await services.sessions.get(tenant_id=tenant_id, session_id=session_id))


@router.patch("/{session_id}")
async def rename_session(
    session_id: str, body: SessionUpdate, services: ServicesDep, tenant_id: TenantDep
) -> SessionPublic:
    session = await services.sessions.update(
        tenant_id=tenant_id, session_id=session_id, title=body.title.strip()
    )
    return session_public(session)


@router.delete("/{session_id}", status_code=204)
async def delete_session(session_id: str, services: ServicesDep, tenant_id: TenantDep) -> Response:
    await services.sessions.delete(tenant_id=tenant_id, session_id=session_id)
    return Response(status_code=204)


@router.put("/{session_id}/summary")
async def set_summary(
    session_id: str, body: SummaryUpdate, services: ServicesDep, tenant_id: TenantDep
) -> SessionPublic:
    session = await services.sessions.update(
        tenant_id=tenant_id, session_id=session_id, summary=body.summary
    )
    return session_public(session)


@router.get("/{session_id}/messages")
async def list_messages(
    session_id: str,
    services: ServicesDep,
    tenant_id: TenantDep,
    include_archived: bool = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> MessageList:
    """The window (newest `limit` messages), or all messages with `include_archived=true`."""
    session = await services.sessions.get(tenant_id=tenant_id, session_id=session_id)
    start = 0 if include_archived else session.window_start_id
    page = await services.messages.page(
        tenant_id=tenant_id,
        session_id=session_id,
        start_id=start,
        before_id=before_id,
        limit=limit + 1,
    )
    has_more = len(page) > limit
    page = page[-limit:]
    return MessageList(
        messages=[message_public(m, window_start_id=session.window_start_id) for m in page],
        window_start_id=session.window_start_id,
        has_more=has_more,
    )


@router.get("/{session_id}/tool-conversations")
async def list_tool_conversations(
    session_id: str,
    services: ServicesDep,
    tenant_id: TenantDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
) -> ToolConversationList:
    await services.sessions.get(tenant_id=tenant_id, session_id=session_id)
    rows = await services.tool_conversations.list(
        tenant_id=tenant_id, session_id=session_id, limit=limit
    )
    return ToolConversationList(
        tool_conversations=[
            ToolConversationPublic(
                id=row.id,
                message_id=row.message_id,
                turn_id=row.turn_id,
                tool_call_id=row.tool_call_id,
                tool_name=row.tool_name,
                arguments=row.arguments,
                result=row.result,
                is_error=row.is_error,
                duration_ms=row.duration_ms,
                user_message=row.user_message,
                timestamp=row.timestamp,
            )
            for row in rows
        ]
    )
