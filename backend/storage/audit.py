"""The audit log: each administrator's action, kept for the operator and the tenant's admins.
Entries name keys by id and settings by section, never by secret or value."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from backend.storage.database import Database
from backend.storage.tables import api_keys, audit_log
from backend.storage.timestamps import aware


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    tenant_id: str
    actor: str
    action: str
    target: str
    detail: dict[str, Any]
    created_at: datetime


class AuditLog:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def record(
        self,
        *,
        tenant_id: str,
        actor_key_id: str | None,
        action: str,
        target: str = "",
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Keep one action; `actor_key_id` None is the operator (TALLY_ADMIN_KEY, or anyone on
        loopback with `auth.mode: none`)."""
        async with self._db.write() as conn:
            actor = "operator"
            if actor_key_id is not None:
                label = await conn.scalar(
                    select(api_keys.c.label).where(api_keys.c.id == actor_key_id)
                )
                actor = f"admin key {label or '(no label)'} ({actor_key_id})"
            await conn.execute(
                audit_log.insert().values(
                    tenant_id=tenant_id,
                    actor=actor,
                    action=action,
                    target=target,
                    detail=detail or {},
                    created_at=datetime.now(UTC),
                )
            )

    async def entries(
        self, *, tenant_id: str | None, limit: int, before_id: int | None = None
    ) -> list[AuditEntry]:
        """The newest first: one tenant's, or every tenant's (None)."""
        query = select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
        if tenant_id is not None:
            query = query.where(audit_log.c.tenant_id == tenant_id)
        if before_id is not None:
            query = query.where(audit_log.c.id < before_id)
        async with self._db.read() as conn:
            rows = await conn.execute(query)
            return [
                AuditEntry(
                    r.id,
                    r.tenant_id,
                    r.actor,
                    r.action,
                    r.target,
                    dict(r.detail or {}),
                    aware(r.created_at),
                )
                for r in rows
            ]
