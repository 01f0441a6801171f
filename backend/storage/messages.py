"""Messages: user messages and final assistant replies, append-only.

The window of a session starts at `sessions.window_start_id`; older messages are archived
(kept, outside the window). Ids are monotonic, so an id range names a fixed set of messages.
Text is made storable on the way in and out (`domain/text.py`): a reply with a NUL is stored
the same on SQLite and PostgreSQL, and a row stored before that never fails a read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import bindparam, case, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from backend.domain.clock import utc_now
from backend.domain.messages import (
    ImagePart,
    MessageShape,
    MessageStatus,
    Role,
    Session,
    StoredMessage,
    TurnFailure,
    UserInput,
)
from backend.domain.text import storable_text
from backend.errors import SessionNotFound
from backend.storage.database import Database
from backend.storage.message_reads import turn_messages, window_messages, window_shape
from backend.storage.sessions import SessionRepository
from backend.storage.tables import messages, sessions, tool_conversations
from backend.storage.usage import UsageDay, add_usage

# Built once: a turn's writes pass only their values, so SQLAlchemy neither builds nor keys a
# statement per call (a measurable share of a turn's CPU at 64 concurrent sessions).
_INSERT_MESSAGE = messages.insert()
_TOUCH_SESSION = (
    update(sessions)
    .where(sessions.c.tenant_id == bindparam("b_tenant"), sessions.c.id == bindparam("b_session"))
    .values(
        updated_at=bindparam("b_now"),
        title=case((sessions.c.title == "", bindparam("b_title")), else_=sessions.c.title),
    )
)


def insert_message(
    conn: Connection,
    *,
    tenant_id: str,
    session_id: str,
    role: Role,
    content: str,
    turn_id: str,
    status: MessageStatus = "complete",
    images: Sequence[ImagePart] = (),
    token_count: int | None = None,
    idempotency_key: str | None = None,
    compacted: bool = False,
    thinking: str = "",
    now: datetime | None = None,
) -> StoredMessage:
    """Append one message inside the caller's write transaction and touch its session; `now`
    (the wall clock by default) is when it was said."""
    content, thinking = storable_text(content), storable_text(thinking)
    now = now or datetime.now(UTC)
    parts = [{"type": "image", "media_type": i.media_type, "data": i.data} for i in images]
    result = conn.execute(
        _INSERT_MESSAGE,
        {
            "tenant_id": tenant_id,
            "session_id": session_id,
            "role": role,
            "content": content,
            "parts": parts or None,
            "turn_id": turn_id,
            "status": status,
            "token_count": token_count,
            "idempotency_key": idempotency_key,
            "created_at": now,
            "compacted": compacted,
            "thinking": thinking or None,
        },
    )
    if role == "user":  # a session is as recent as its last message from the user
        _touch_session(conn, tenant_id=tenant_id, session_id=session_id, text=content, now=now)
    (message_id,) = result.inserted_primary_key or (0,)
    return StoredMessage(
        id=int(message_id),
        session_id=session_id,
        role=role,
        content=content,
        turn_id=turn_id,
        status=status,
        created_at=now,
        images=tuple(images),
        token_count=token_count,
        compacted=compacted,
        thinking=thinking,
        idempotency_key=idempotency_key,
    )


def _touch_session(
    conn: Connection, *, tenant_id: str, session_id: str, text: str, now: datetime
) -> None:
    """Mark the session active now; an untitled session takes its first message as title."""
    title = " ".join(text.split())[:60]
    conn.execute(
        _TOUCH_SESSION,
        {
            "b_tenant": tenant_id,
            "b_session": session_id,
            "b_now": now,
            "b_title": title,
        },
    )


def link_tool_conversations(
    conn: Connection, *, tenant_id: str, turn_id: str, message_id: int
) -> None:
    """Point the turn's tool conversations at its final assistant message."""
    conn.execute(
        update(tool_conversations)
        .where(tool_conversations.c.tenant_id == tenant_id, tool_conversations.c.turn_id == turn_id)
        .values(message_id=message_id)
    )


class MessageRepository:
    """Messages as said: `clock` dates them (the wall clock; the memory eval simulates months)."""

    def __init__(self, database: Database, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._db = database
        self._clock = clock

    async def add_user(
        self,
        *,
        tenant_id: str,
        session_id: str,
        turn_id: str,
        user_input: UserInput,
        token_count: int | None = None,
        idempotency_key: str | None = None,
    ) -> StoredMessage:

        def store(conn: Connection) -> StoredMessage:
            return insert_message(
                conn,
                tenant_id=tenant_id,
                session_id=session_id,
                role="user",
                content=user_input.text,
                turn_id=turn_id,
                images=user_input.images,
                token_count=token_count,
                idempotency_key=idempotency_key,
                now=self._clock(),  # in the transaction: later ids are said later
            )

        message = await self._db.run_write(store)
        self._db.notices.said(tenant_id, message)
        return message

    async def add_reply(
        self,
        *,
        tenant_id: str,
        session_id: str,
        turn_id: str,
        content: str,
        status: MessageStatus,
        token_count: int | None = None,
        usage: UsageDay | None = None,
        has_tool_calls: bool = True,
        compacted: bool = False,
        thinking: str = "",
    ) -> StoredMessage:
        """Store the turn's assistant reply, link the turn's tool conversations to it and
        account its usage: one transaction."""

        def store(conn: Connection) -> StoredMessage:
            if usage is not None:
                add_usage(conn, usage)
            reply = insert_message(
                conn,
                tenant_id=tenant_id,
                session_id=session_id,
                role="assistant",
                content=content,
                turn_id=turn_id,
                status=status,
                token_count=token_count,
                compacted=compacted,
                thinking=thinking,
                now=self._clock(),
            )
            if has_tool_calls:
                link_tool_conversations(
                    conn, tenant_id=tenant_id, turn_id=turn_id, message_id=reply.id
                )
            return reply

        try:
            reply = await self._db.run_write(store)
        except IntegrityError as exc:  # the session was deleted while the turn ran
            raise SessionNotFound(session_id) from exc
        self._db.notices.said(tenant_id, reply)
        return reply

    async def record_failure(
        self, *, tenant_id: str, message_id: int, failure: TurnFailure, resume_key: str
    ) -> str:
        """Keep how a user message's turn failed, and a key that resumes it (its own key, or
        `resume_key` when the client sent none); that key."""
        owned = (messages.c.tenant_id == tenant_id) & (messages.c.id == message_id)
        async with self._db.write() as conn:
            await conn.execute(
                update(messages)
                .where(owned)
                .values(
                    failure_code=failure.code,
                    failure_message=failure.message,
                    idempotency_key=func.coalesce(messages.c.idempotency_key, resume_key),
                )
            )
            key = await conn.scalar(select(messages.c.idempotency_key).where(owned))
        return str(key or resume_key)

    async def clear_failure(self, *, tenant_id: str, message_id: int) -> None:
        """The turn was answered after all: its message shows no failure any more."""
        async with self._db.write() as conn:
            await conn.execute(
                update(messages)
                .where(messages.c.tenant_id == tenant_id, messages.c.id == message_id)
                .values(failure_code=None, failure_message=None)
            )

    async def session_with_window(
        self, *, tenant_id: str, session_id: str, limit: int | None
    ) -> tuple[Session, list[StoredMessage]]:
        """A session and the newest `limit` messages of its window, in one read."""

        def read(conn: Connection) -> tuple[Session, list[StoredMessage]]:
            session = SessionRepository.get_in(conn, tenant_id=tenant_id, session_id=session_id)
            window = window_messages(
                conn,
                tenant_id=tenant_id,
                session_id=session_id,
                start_id=session.window_start_id,
                limit=limit,
            )
            return session, window

        return await self._db.run_read(read)

    async def session_with_shape(
        self, *, tenant_id: str, session_id: str
    ) -> tuple[Session, list[MessageShape]]:
        """A session and its whole window's shape, oldest first, in one read: what planning
        its overflow reads, without the messages' text."""

        def read(conn: Connection) -> tuple[Session, list[MessageShape]]:
            session = SessionRepository.get_in(conn, tenant_id=tenant_id, session_id=session_id)
            shape = window_shape(
                conn, tenant_id=tenant_id, session_id=session_id, start_id=session.window_start_id
            )
            return session, shape

        return await self._db.run_read(read)

    async def window(
        self, *, tenant_id: str, session_id: str, start_id: int, limit: int | None
    ) -> list[StoredMessage]:
        return await self._db.run_read(
            window_messages,
            tenant_id=tenant_id,
            session_id=session_id,
            start_id=start_id,
            limit=limit,
        )

    async def page(
        self,
        *,
        tenant_id: str,
        session_id: str,
        start_id: int,
        before_id: int | None,
        limit: int,
    ) -> list[StoredMessage]:
        """Up to `limit` messages with start_id <= id < before_id, newest last."""
        return await self._db.run_read(
            window_messages,
            tenant_id=tenant_id,
            session_id=session_id,
            start_id=start_id,
            limit=limit,
            before_id=before_id,
        )

    async def between(
        self, *, tenant_id: str, session_id: str, first_id: int, last_id: int
    ) -> list[StoredMessage]:
        """Messages with first_id <= id <= last_id, oldest first."""
        return await self._db.run_read(
            window_messages,
            tenant_id=tenant_id,
            session_id=session_id,
            start_id=first_id,
            limit=None,
            before_id=last_id + 1,
        )

    async def by_idempotency_key(
        self, *, tenant_id: str, idempotency_key: str
    ) -> list[StoredMessage]:
        return await self._db.run_read(
            turn_messages, tenant_id=tenant_id, idempotency_key=idempotency_key
        )
