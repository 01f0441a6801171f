"""Reading messages: a row as a StoredMessage (its text made storable, `domain/text.py`), a
session's window or the shape of it, and a turn's messages by its idempotency key. Plain
(synchronous) SQLAlchemy, run inside `Database.run_read` and `run_write`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.engine import Connection

from backend.domain.messages import ImagePart, MessageShape, StoredMessage, TurnFailure
from backend.domain.text import storable_text
from backend.storage.tables import messages
from backend.storage.timestamps import aware

# The columns a StoredMessage is made of, in the order `message_from_row` takes them: a window
# of fifty rows is read every turn, and unpacking a row costs a fraction of reading each column
# by name.
_STORED = (
    messages.c.id,
    messages.c.session_id,
    messages.c.role,
    messages.c.content,
    messages.c.turn_id,
    messages.c.status,
    messages.c.created_at,
    messages.c.parts,
    messages.c.token_count,
    messages.c.compacted,
    messages.c.thinking,
    messages.c.failure_code,
    messages.c.failure_message,
    messages.c.idempotency_key,
)


def message_from_row(row: Sequence[Any]) -> StoredMessage:
    """A row of `select(*_STORED)` as a StoredMessage."""
    (
        id_,
        session_id,
        role,
        content,
        turn_id,
        status,
        created_at,
        parts,
        token_count,
        compacted,
        thinking,
        failure_code,
        failure_message,
        idempotency_key,
    ) = row
    return StoredMessage(
        id=id_,
        session_id=session_id,
        role=role,
        content=storable_text(content),
        turn_id=turn_id,
        status=status,
        created_at=aware(created_at),
        images=_images_from_parts(parts) if parts else (),
        token_count=token_count,
        compacted=compacted,
        thinking=storable_text(thinking) if thinking else "",
        failure=TurnFailure(failure_code, failure_message or "") if failure_code else None,
        idempotency_key=idempotency_key,
    )


def _images_from_parts(parts: list[dict[str, str]]) -> tuple[ImagePart, ...]:
    return tuple(
        ImagePart(media_type=part["media_type"], data=part["data"])
        for part in parts
        if part.get("type") == "image"
    )


def window_messages(
    conn: Connection,
    *,
    tenant_id: str,
    session_id: str,
    start_id: int,
    limit: int | None,
    before_id: int | None = None,
) -> list[StoredMessage]:
    """The newest `limit` messages (all when None) with id >= start_id, oldest first.

    Reads newest-first through the (tenant_id, session_id, id) index, so the cost does not
    grow with the number of archived messages.
    """
    query = _window_query(has_before=before_id is not None, has_limit=limit is not None)
    bounds = {"b_tenant": tenant_id, "b_session": session_id, "b_start": start_id}
    if before_id is not None:
        bounds["b_before"] = before_id
    if limit is not None:
        bounds["b_limit"] = limit
    rows = conn.execute(query, bounds).all()
    return [message_from_row(row) for row in reversed(rows)]


@functools.cache  # built once: every turn reads its window, and a built query keeps its key
def _window_query(*, has_before: bool, has_limit: bool) -> Select[Any]:
    query = (
        select(*_STORED)
        .where(
            messages.c.tenant_id == bindparam("b_tenant"),
            messages.c.session_id == bindparam("b_session"),
            messages.c.id >= bindparam("b_start"),
        )
        .order_by(messages.c.id.desc())
    )
    if has_before:
        query = query.where(messages.c.id < bindparam("b_before"))
    if has_limit:
        query = query.limit(bindparam("b_limit"))
    return query


def window_shape(
    conn: Connection, *, tenant_id: str, session_id: str, start_id: int
) -> list[MessageShape]:
    """The shape of every message with id >= start_id, oldest first: what planning reads,
    without the text (a length in characters on both databases)."""
    bounds = {"b_tenant": tenant_id, "b_session": session_id, "b_start": start_id}
    return [MessageShape(*row) for row in conn.execute(_SHAPE_QUERY, bounds)]


_SHAPE_QUERY = (
    select(
        messages.c.id,
        messages.c.role,
        messages.c.token_count,
        func.coalesce(func.length(messages.c.content), 0),
    )
    .where(
        messages.c.tenant_id == bindparam("b_tenant"),
        messages.c.session_id == bindparam("b_session"),
        messages.c.id >= bindparam("b_start"),
    )
    .order_by(messages.c.id)
)


def turn_messages(conn: Connection, *, tenant_id: str, idempotency_key: str) -> list[StoredMessage]:
    """The user message stored under an idempotency key (unique per tenant) and the reply of
    its turn, if any."""
    first = conn.execute(
        select(messages.c.turn_id).where(
            messages.c.tenant_id == tenant_id,
            messages.c.idempotency_key == idempotency_key,
        )
    ).first()
    if first is None:
        return []
    rows = conn.execute(
        select(*_STORED)
        .where(messages.c.tenant_id == tenant_id, messages.c.turn_id == first.turn_id)
        .order_by(messages.c.id)
    )
    return [message_from_row(row) for row in rows]
