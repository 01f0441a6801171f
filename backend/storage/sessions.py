"""Sessions: one conversation of one tenant on one channel."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from backend.domain.ids import new_session_id
from backend.domain.messages import Session
from backend.domain.text import storable_text
from backend.errors import SessionNotFound
from backend.storage.database import Database
from backend.storage.notices import Deleted
from backend.storage.tables import messages, sessions, tool_conversations
from backend.storage.timestamps import aware

# Read at the start of every turn: built once, it keeps its cache key.
_GET_SESSION = select(sessions).where(
    sessions.c.tenant_id == bindparam("b_tenant"), sessions.c.id == bindparam("b_id")
)


def session_from_row(row: Any) -> Session:
    return Session(
        id=row.id,
        tenant_id=row.tenant_id,
        channel=row.channel,
        title=storable_text(row.title),
        summary=storable_text(row.summary),
        window_start_id=row.window_start_id,
        memory_watermark_id=row.memory_watermark_id,
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        external_key=row.external_key,
        user_key=row.user_key,
    )


class SessionRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def create(
        self,
        *,
        tenant_id: str,
        channel: str,
        title: str = "",
        external_key: str | None = None,
        user_key: str | None = None,
    ) -> Session:
        now = datetime.now(UTC)
        session = Session(
            id=new_session_id(),
            tenant_id=tenant_id,
            channel=channel,
            title=title,
            summary="",
            window_start_id=0,
            created_at=now,
            updated_at=now,
            external_key=external_key,
            user_key=user_key,
        )
        async with self._db.write() as conn:
            await conn.execute(sessions.insert().values(**dataclasses.asdict(session)))
        return session

    async def find_or_create(
        self,
        *,
        tenant_id: str,
        channel: str,
        external_key: str,
        user_key: str | None = None,
        title: str = "",
    ) -> Session:
        """The tenant's session named `external_key` on `channel`, created on first use.

        (tenant, channel, external_key) is unique, so the same key under another tenant is
        another session. When two first requests race, one insert wins and the other reads
        the winner's row. `user_key` and `title` only apply to a session being created.
        """
        found = await self.find(tenant_id=tenant_id, channel=channel, external_key=external_key)
        if found is not None:
            return found
        try:
            return await self.create(
                tenant_id=tenant_id,
                channel=channel,
                title=title,
                external_key=external_key,
                user_key=user_key,
            )
        except IntegrityError:
            found = await self.find(tenant_id=tenant_id, channel=channel, external_key=external_key)
            if found is None:  # not the race: another constraint (an unknown tenant, say)
                raise
            return found

    async def find(self, *, tenant_id: str, channel: str, external_key: str) -> Session | None:
        """The tenant's session named `external_key` on `channel` (exactly), if there is one."""
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(sessions).where(
                        sessions.c.tenant_id == tenant_id,
                        sessions.c.channel == channel,
                        sessions.c.external_key == external_key,
                    )
                )
            ).first()
        return None if row is None else session_from_row(row)

    async def quiet_with_tail(self, *, since: datetime, limit: int) -> list[Session]:
        """Sessions of every tenant where no one spoke since `since` and a whole turn is said
        after what memory took in (an answer after the watermark): the tails to distill,
        the longest quiet first."""
        undistilled = (
            select(messages.c.id)
            .where(
                messages.c.tenant_id == sessions.c.tenant_id,
                messages.c.session_id == sessions.c.id,
                messages.c.id > sessions.c.memory_watermark_id,
                messages.c.role == "assistant",
                messages.c.status == "complete",
            )
            .exists()
        )
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(sessions)
                .where(sessions.c.updated_at < since, undistilled)
                .order_by(sessions.c.updated_at)
                .limit(limit)
            )
            return [session_from_row(row) for row in rows]

    async def detach(self, *, tenant_id: str, channel: str, external_key: str) -> bool:
        """Let the platform chat `external_key` start a new session on its next message; the
        old session is kept, no longer named by it. False when the chat had none."""
        async with self._db.write() as conn:
            result = await conn.execute(
                update(sessions)
                .where(
                    sessions.c.tenant_id == tenant_id,
                    sessions.c.channel == channel,
                    sessions.c.external_key == external_key,
                )
                .values(external_key=None, updated_at=datetime.now(UTC))
            )
            return bool(result.rowcount)

    async def get(self, *, tenant_id: str, session_id: str) -> Session:
        return await self._db.run_read(self.get_in, tenant_id=tenant_id, session_id=session_id)

    @staticmethod
    def get_in(conn: Connection, *, tenant_id: str, session_id: str) -> Session:
        row = conn.execute(_GET_SESSION, {"b_tenant": tenant_id, "b_id": session_id}).first()
        if row is None:
            raise SessionNotFound(session_id)
        return session_from_row(row)

    async def user_keys(self, *, tenant_id: str, limit: int = 1000) -> list[str]:
        """The end users (`user`) the tenant's sessions belong to, at most `limit`."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(sessions.c.user_key)
                .where(sessions.c.tenant_id == tenant_id, sessions.c.user_key.is_not(None))
                .distinct()
                .order_by(sessions.c.user_key)
                .limit(limit)
            )
            return [row.user_key for row in rows]

    async def list(
        self, *, tenant_id: str, limit: int = 50, offset: int = 0, query: str | None = None
    ) -> tuple[list[Session], int]:
        """The tenant's sessions, most recently active first, and how many there are."""
        where = [sessions.c.tenant_id == tenant_id]
        if query:
            where.append(sessions.c.title.ilike(f"%{_escape_like(query)}%", escape="\\"))
        async with self._db.read() as conn:
            total = (
                await conn.execute(select(func.count()).select_from(sessions).where(*where))
            ).scalar_one()
            rows = await conn.execute(
                select(sessions)
                .where(*where)
                .order_by(sessions.c.updated_at.desc(), sessions.c.id)
                .limit(limit)
                .offset(offset)
            )
            return [session_from_row(row) for row in rows], total

    async def update(self, *, tenant_id: str, session_id: str, **values: str | int) -> Session:
        """Set columns (`title`, `summary`, `window_start_id`) of one session."""
        values = {k: storable_text(v) if isinstance(v, str) else v for k, v in values.items()}
        async with self._db.write() as conn:
            result = await conn.execute(
                update(sessions)
                .where(sessions.c.tenant_id == tenant_id, sessions.c.id == session_id)
                .values(**values, updated_at=datetime.now(UTC))
            )
            if result.rowcount == 0:
                raise SessionNotFound(session_id)
            return await conn.run_sync(self.get_in, tenant_id=tenant_id, session_id=session_id)

    async def delete(self, *, tenant_id: str, session_id: str) -> None:
        """Delete a session with its messages and tool conversations."""
        async with self._db.write() as conn:
            owned = (sessions.c.tenant_id == tenant_id) & (sessions.c.id == session_id)
            if (await conn.execute(select(sessions.c.id).where(owned))).first() is None:
                raise SessionNotFound(session_id)
            for table in (tool_conversations, messages):
                await conn.execute(
                    delete(table).where(
                        table.c.tenant_id == tenant_id, table.c.session_id == session_id
                    )
                )
            await conn.execute(delete(sessions).where(owned))
        self._db.notices.deleted(Deleted(tenant_id, session_id))


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
