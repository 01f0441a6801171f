"""Tool conversations: every tool call of a turn, kept apart from the messages.

Everything in a row comes from the model or a tool, so it is made storable on the way in and
out (`domain/text.py`), and the call's id and name are cut to their columns' 200 characters: a
call the model named oddly is stored, never a failed turn, and never a failed read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, select

from backend.domain.events import ToolCallRecord
from backend.domain.messages import ToolConversation
from backend.domain.text import storable_json, storable_object, storable_text
from backend.storage.database import Database
from backend.storage.tables import tool_conversations
from backend.storage.timestamps import aware

NAME_CHARS = 200  # tool_call_id and tool_name


def tool_conversation_from_row(row: Row[Any]) -> ToolConversation:
    return ToolConversation(
        id=row.id,
        session_id=row.session_id,
        message_id=row.message_id,
        turn_id=row.turn_id,
        tool_call_id=storable_text(row.tool_call_id),
        tool_name=storable_text(row.tool_name),
        arguments=_arguments(row.arguments),
        result=storable_text(row.result),
        is_error=row.is_error,
        duration_ms=row.duration_ms,
        user_message=storable_text(row.user_message),
        timestamp=aware(row.timestamp),
    )


def _arguments(value: object) -> dict[str, object]:
    return storable_object(value) if isinstance(value, dict) else {"value": storable_json(value)}


def _column(text: str) -> str:
    return storable_text(text)[:NAME_CHARS]


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
                    tool_call_id=_column(record.tool_call_id),
                    tool_name=_column(record.tool_name),
                    arguments=storable_object(record.arguments),
                    result=storable_text(record.result),
                    is_error=record.is_error,
                    duration_ms=record.duration_ms,
                    user_message=storable_text(user_message),
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
