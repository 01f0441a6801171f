"""Tenants and their API keys. Keys are stored as a lookup prefix and a hash, never in clear."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, func, select, update
from sqlalchemy.exc import IntegrityError

from backend.errors import Conflict, NotFound
from backend.storage.database import Database
from backend.storage.tables import api_keys, tenants
from backend.storage.timestamps import aware, aware_or_none


class TenantNotFound(NotFound):
    code = "tenant_not_found"


class ApiKeyNotFound(NotFound):
    code = "api_key_not_found"


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    name: str
    settings: dict[str, Any]
    created_at: datetime
    disabled_at: datetime | None

    @property
    def is_disabled(self) -> bool:
        return self.disabled_at is not None


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    id: str
    tenant_id: str
    prefix: str
    hash: str
    scope: str
    label: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def _tenant(row: Row[Any]) -> Tenant:
    return Tenant(
        id=row.id,
        name=row.name,
        settings=dict(row.settings or {}),
        created_at=aware_or_none(row.created_at) or datetime.now(UTC),
        disabled_at=aware_or_none(row.disabled_at),
    )


def _key(row: Row[Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        id=row.id,
        tenant_id=row.tenant_id,
        prefix=row.prefix,
        hash=row.hash,
        scope=row.scope,
        label=row.label,
        created_at=aware_or_none(row.created_at) or datetime.now(UTC),
        last_used_at=aware_or_none(row.last_used_at),
        revoked_at=aware_or_none(row.revoked_at),
    )


class TenantRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def create(self, *, tenant_id: str, name: str, settings: dict[str, Any]) -> Tenant:
        now = datetime.now(UTC)
        try:
            async with self._db.write() as conn:
                await conn.execute(
                    tenants.insert().values(
                        id=tenant_id, name=name, settings=settings, created_at=now
                    )
                )
        except IntegrityError as exc:
            raise Conflict(f"tenant {tenant_id!r} exists", code="tenant_exists") from exc
        return Tenant(tenant_id, name, settings, now, None)

    async def ensure(self, *, tenant_id: str) -> None:
        """A row for a tenant config.yaml names (its settings stay in the file), if it has
        none yet: its sessions and keys need one."""
        try:
            await self.get(tenant_id=tenant_id)
        except TenantNotFound:
            with contextlib.suppress(Conflict):  # another process made it meanwhile
                await self.create(tenant_id=tenant_id, name=tenant_id, settings={})

    async def get(self, *, tenant_id: str) -> Tenant:
        async with self._db.read() as conn:
            row = (await conn.execute(select(tenants).where(tenants.c.id == tenant_id))).first()
        if row is None:
            raise TenantNotFound(f"tenant {tenant_id!r} does not exist")
        return _tenant(row)

    async def list_all(self) -> list[Tenant]:
        """Every tenant: for the operator's admin API and CLI only."""
        async with self._db.read() as conn:
            rows = await conn.execute(select(tenants).order_by(tenants.c.created_at, tenants.c.id))
            return [_tenant(row) for row in rows]

    async def update(self, *, tenant_id: str, **values: object) -> Tenant:
        """Set `name`, `settings` or `disabled_at` of one tenant (none: just read it)."""
        if not values:
            return await self.get(tenant_id=tenant_id)
        async with self._db.write() as conn:
            result = await conn.execute(
                update(tenants).where(tenants.c.id == tenant_id).values(**values)
            )
        if result.rowcount == 0:
            raise TenantNotFound(f"tenant {tenant_id!r} does not exist")
        return await self.get(tenant_id=tenant_id)


class ApiKeyRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(self, record: ApiKeyRecord) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                api_keys.insert().values(
                    id=record.id,
                    tenant_id=record.tenant_id,
                    prefix=record.prefix,
                    hash=record.hash,
                    scope=record.scope,
                    label=record.label,
                    created_at=record.created_at,
                )
            )

    async def active_by_prefix(self, prefix: str) -> list[ApiKeyRecord]:
        """Unrevoked keys of enabled tenants with this prefix: the candidates for a request
        (the prefix is not secret; the hash decides)."""
        return await self._unrevoked_by_prefix(prefix, tenants.c.disabled_at.is_(None))

    async def disabled_by_prefix(self, prefix: str) -> list[ApiKeyRecord]:
        """Unrevoked keys of disabled tenants with this prefix: a request with one is told
        its tenant is disabled rather than that its key is unknown."""
        return await self._unrevoked_by_prefix(prefix, tenants.c.disabled_at.is_not(None))

    async def _unrevoked_by_prefix(
        self, prefix: str, tenant_state: ColumnElement[bool]
    ) -> list[ApiKeyRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(api_keys)
                .join(tenants, tenants.c.id == api_keys.c.tenant_id)
                .where(api_keys.c.prefix == prefix, api_keys.c.revoked_at.is_(None), tenant_state)
            )
            return [_key(row) for row in rows]

    async def list(self, *, tenant_id: str) -> list[ApiKeyRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(api_keys)
                .where(api_keys.c.tenant_id == tenant_id)
                .order_by(api_keys.c.created_at)
            )
            return [_key(row) for row in rows]

    async def newest_by_tenant(self) -> dict[str, datetime]:
        """When each tenant's newest key was made (tenants without keys are absent)."""
        newest = func.max(api_keys.c.created_at)
        async with self._db.read() as conn:
            rows = await conn.execute(select(api_keys.c.tenant_id, newest).group_by("tenant_id"))
            return {tenant_id: aware(at) for tenant_id, at in rows}

    async def revoke(self, *, key_id: str, tenant_id: str | None = None) -> str:
        """Revoke a key (the admin names any key; a tenant only its own); the key's tenant."""
        where = [api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None)]
        if tenant_id is not None:
            where.append(api_keys.c.tenant_id == tenant_id)
        async with self._db.write() as conn:
            owner = await conn.scalar(select(api_keys.c.tenant_id).where(*where))
            result = await conn.execute(
                update(api_keys).where(*where).values(revoked_at=datetime.now(UTC))
            )
        if result.rowcount == 0 or owner is None:
            raise ApiKeyNotFound(f"no active key {key_id!r}")
        return str(owner)

    async def touch(self, *, key_id: str, at: datetime) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                update(api_keys).where(api_keys.c.id == key_id).values(last_used_at=at)
            )
