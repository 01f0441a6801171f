"""Tool conversations: every tool call of a turn, kept apart from the messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, select

from backend.domain.events import ToolCallRecord
from backend.domain.messages import ToolConversation
from backend.storage.database import Database
from backend.storage.tables import tool_conversations
from backend.storage.timestamps import aware


def tool_conversation_from_row(row: Row[Any]) -> ToolConversation:
    return ToolConversation(
        id=row.id,
        session_id=row.session_id,
        message_id=row.message_id,
        turn_id=row.turn_id,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        arguments=row.arguments,
        result=row.result,
        is_error=row.is_error,
        duration_ms=row.duration_ms,
        user_message=row.user_message,
        timestamp=aware(row.timestamp),
    )


class ToolConversationRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(
        self,
        *,
        tenant_id: str,
        session_id: str,
        turn_id: str,
        record: ToolCallRecord,
        user_message: str,
    ) -> int:
        """Record one executed call; `message_id` is linked when the turn's reply is stored."""
        async with self._db.write() as conn:
            result = await conn.execute(
                tool_conversations.insert().values(
                    tenant_id=tenant_id,
                    session_id=session_id,
                    turn_id=turn_id,
                    tool_call_id=record.tool_call_id,
                    tool_name=record.tool_name,
                    arguments=record.arguments,
                    result=record.result,
                    is_error=record.is_error,
                    duration_ms=record.duration_ms,
                    user_message=user_message,
                    timestamp=datetime.now(UTC),
                )
            )
            (row_id,) = result.inserted_primary_key or (0,)
            return int(row_id)

    async def list(
        self, *, tenant_id: str, session_id: str, limit: int = 200, before_id: int | None = None
    ) -> list[ToolConversation]:
        where = [
            tool_conversations.c.tenant_id == tenant_id,
            tool_conversations.c.session_id == session_id,
        ]
        if before_id is not None:
            where.append(tool_conversations.c.id < before_id)
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(tool_conversations)
                .where(*where)
                .order_by(tool_conversations.c.id.desc())
                .limit(limit)
            )
            return [tool_conversation_from_row(row) for row in reversed(rows.all())]
