"""The messages a memory scope has said, for memory to search: every complete message of the
scope's sessions, read in id order from where a reader left off.

A scope's sessions are the tenant's (`memory.scope: tenant`), or those of its end users (one
user key, or every identity of a linked person), or, for a session without an end user under
`memory.scope: user`, the tenant's sessions without one. Never another tenant's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, bindparam, or_, select

from backend.domain.inbound import origin_of
from backend.domain.messages import Role
from backend.storage.database import Database
from backend.storage.tables import messages, sessions
from backend.storage.timestamps import aware

_BATCH = 500  # ids per existence check: well under every driver's bound-parameter limit


@dataclass(frozen=True, slots=True)
class SaidMessage:
    id: int
    session_id: str
    role: Role
    content: str
    created_at: datetime
    origin: str  # where it was said, as memory lines name it (`web`, `telegram:helper:42`)
    user_key: str | None = None  # the end user of its session


class ArchiveReader:
    def __init__(self, database: Database) -> None:
        self._db = database
        self.is_shared = database.is_shared  # other processes may delete what it read

    async def said_after(
        self, *, tenant_id: str, user_keys: Sequence[str] | None, after_id: int, limit: int
    ) -> list[SaidMessage]:
        """Up to `limit` complete messages with id > `after_id` of the scope's sessions, oldest
        first. `user_keys`: None for every session of the tenant; empty for its sessions
        without an end user; else the sessions of those end users."""
        values: dict[str, object] = {"tenant": tenant_id, "after": after_id, "limit": limit}
        if user_keys is None:
            statement = _SAID_IN_TENANT
        elif not user_keys:
            statement = _SAID_WITHOUT_USER
        else:
            statement, values["keys"] = _SAID_BY_USERS, list(user_keys)
        async with self._db.read() as conn:
            return [_said(row) for row in await conn.execute(statement, values)]

    async def existing(self, *, tenant_id: str, ids: Collection[int]) -> set[int]:
        """Those of `ids` still stored (a deleted session takes its messages with it)."""
        wanted = sorted(ids)
        found: set[int] = set()
        async with self._db.read() as conn:
            for start in range(0, len(wanted), _BATCH):
                batch = wanted[start : start + _BATCH]
                rows = await conn.scalars(_EXISTING, {"tenant": tenant_id, "ids": batch})
                found.update(int(message_id) for message_id in rows)
        return found


def _scope_messages(sessions_of: ColumnElement[bool] | None) -> Select[Any]:
    """The scope's messages after `after`, oldest first, at most `limit`; built once per kind
    of scope, so a turn passes only its values (as messages.py does for its writes)."""
    query = (
        select(
            messages.c.id,
            messages.c.session_id,
            messages.c.role,
            messages.c.content,
            messages.c.created_at,
            sessions.c.channel,
            sessions.c.external_key,
            sessions.c.user_key,
        )
        .join(sessions, sessions.c.id == messages.c.session_id)
        .where(
            messages.c.tenant_id == bindparam("tenant"),
            sessions.c.tenant_id == bindparam("tenant"),
            messages.c.status == "complete",
            messages.c.id > bindparam("after"),
        )
    )
    if sessions_of is not None:
        query = query.where(sessions_of)
    return query.order_by(messages.c.id).limit(bindparam("limit"))


_SAID_IN_TENANT = _scope_messages(None)
_SAID_WITHOUT_USER = _scope_messages(or_(sessions.c.user_key.is_(None), sessions.c.user_key == ""))
_SAID_BY_USERS = _scope_messages(sessions.c.user_key.in_(bindparam("keys", expanding=True)))
_EXISTING = select(messages.c.id).where(
    messages.c.tenant_id == bindparam("tenant"),
    messages.c.id.in_(bindparam("ids", expanding=True)),
)


def _said(row: Any) -> SaidMessage:
    return SaidMessage(
        id=int(row.id),
        session_id=row.session_id,
        role=row.role,
        content=row.content,
        created_at=aware(row.created_at),
        origin=origin_of(row.channel, row.external_key),
        user_key=row.user_key,
    )
