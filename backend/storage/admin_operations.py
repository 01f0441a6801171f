"""Long administrative operations and their progress, kept in the database so the console
can poll them through any worker. An operation runs in the process that started it; one left
`running` by a process that stopped says so when read (`stalled`)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Row, Select, select, update

from backend.errors import NotFound
from backend.storage.database import Database
from backend.storage.tables import admin_operations
from backend.storage.timestamps import aware, aware_or_none

OperationKind = Literal["resummarize", "export"]
OperationState = Literal["running", "done", "failed"]
# A running operation reports progress at least this often; silent longer, its process is gone.
STALLED_AFTER = timedelta(minutes=10)


class OperationNotFound(NotFound):
    pass


@dataclass(frozen=True, slots=True)
class Operation:
    id: str
    tenant_id: str
    kind: OperationKind
    state: OperationState
    done: int
    total: int
    message: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    has_result: bool

    @property
    def is_stalled(self) -> bool:
        return self.state == "running" and datetime.now(UTC) - self.updated_at > STALLED_AFTER


def _operation(row: Row[Any]) -> Operation:
    return Operation(
        id=row.id,
        tenant_id=row.tenant_id,
        kind=row.kind,
        state=row.state,
        done=row.done,
        total=row.total,
        message=row.message,
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        finished_at=aware_or_none(row.finished_at),
        has_result=row.has_result,
    )


def _select() -> Select[Any]:
    """Every column but the (possibly large) result, and whether there is one."""
    columns = [c for c in admin_operations.c if c.name != "result"]
    return select(*columns, admin_operations.c.result.is_not(None).label("has_result"))


class AdminOperationRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def start(self, *, tenant_id: str, kind: OperationKind) -> Operation:
        now = datetime.now(UTC)
        operation_id = secrets.token_hex(8)
        async with self._db.write() as conn:
            await conn.execute(
                admin_operations.insert().values(
                    id=operation_id,
                    tenant_id=tenant_id,
                    kind=kind,
                    state="running",
                    done=0,
                    total=0,
                    message="",
                    created_at=now,
                    updated_at=now,
                )
            )
        return await self.get(operation_id=operation_id)

    async def progress(self, operation_id: str, *, done: int, total: int, message: str) -> None:
        await self._set(operation_id, done=done, total=total, message=message)

    async def finish(
        self,
        operation_id: str,
        *,
        state: OperationState,
        message: str,
        result: dict[str, Any] | None = None,
    ) -> None:
        values: dict[str, object] = {"state": state, "message": message}
        if result is not None:  # never written otherwise: JSON would store None as 'null'
            values["result"] = result
        await self._set(operation_id, **values, finished_at=datetime.now(UTC))

    async def get(self, *, operation_id: str, tenant_id: str | None = None) -> Operation:
        """One operation; OperationNotFound also when it is another tenant's (`tenant_id`)."""
        query = _select().where(admin_operations.c.id == operation_id)
        if tenant_id is not None:
            query = query.where(admin_operations.c.tenant_id == tenant_id)
        async with self._db.read() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            raise OperationNotFound(f"operation {operation_id!r} does not exist")
        return _operation(row)

    async def result(self, *, operation_id: str, tenant_id: str | None = None) -> dict[str, Any]:
        operation = await self.get(operation_id=operation_id, tenant_id=tenant_id)
        async with self._db.read() as conn:
            found = await conn.scalar(
                select(admin_operations.c.result).where(admin_operations.c.id == operation.id)
            )
        if found is None:
            raise OperationNotFound(f"operation {operation_id!r} has no result (yet)")
        result: dict[str, Any] = found
        return result

    async def list(self, *, tenant_id: str | None, limit: int = 20) -> list[Operation]:
        """Newest first; every tenant's when `tenant_id` is None (the operator)."""
        query = _select()
        if tenant_id is not None:
            query = query.where(admin_operations.c.tenant_id == tenant_id)
        query = query.order_by(admin_operations.c.created_at.desc()).limit(limit)
        async with self._db.read() as conn:
            return [_operation(row) for row in await conn.execute(query)]

    async def _set(self, operation_id: str, **values: object) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                update(admin_operations)
                .where(admin_operations.c.id == operation_id)
                .values(**values, updated_at=datetime.now(UTC))
            )
