"""Long administrative operations (`re-summarize`, `export`) started from the console, and
their progress, readable through any worker."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from backend.api.admin import own_tenant
from backend.api.auth import AdminDep
from backend.api.console_schemas import OperationCreate, OperationList, OperationPublic
from backend.api.deps import OperationsDep, ServicesDep
from backend.storage.admin_operations import Operation
from backend.tenancy.keys import Principal

router = APIRouter(prefix="/api/admin", tags=["admin"])


def _public(operation: Operation) -> OperationPublic:
    has_export = operation.kind == "export" and operation.has_result
    return OperationPublic(
        id=operation.id,
        tenant_id=operation.tenant_id,
        kind=operation.kind,
        state="stalled" if operation.is_stalled else operation.state,
        done=operation.done,
        total=operation.total,
        message=operation.message,
        created_at=operation.created_at,
        finished_at=operation.finished_at,
        result_url=f"/api/admin/operations/{operation.id}/result" if has_export else None,
    )


def _scope(admin: Principal) -> str | None:
    """The tenant whose operations the caller may see (None: every tenant's)."""
    return None if admin.is_operator else admin.tenant_id


@router.post("/tenants/{tenant_id}/operations", status_code=202)
async def start_operation(
    tenant_id: str,
    body: OperationCreate,
    services: ServicesDep,
    operations: OperationsDep,
    admin: AdminDep,
) -> OperationPublic:
    own_tenant(admin, tenant_id)
    await services.tenants.get(tenant_id=tenant_id)
    operation = await operations.start(tenant_id=tenant_id, kind=body.kind)
    await services.audit.record(
        tenant_id=tenant_id,
        actor_key_id=admin.key_id,
        action="operation.start",
        target=operation.id,
        detail={"kind": body.kind},
    )
    return _public(operation)


@router.get("/operations")
async def list_operations(
    services: ServicesDep,
    admin: AdminDep,
    tenant_id: Annotated[str | None, Query(max_length=64)] = None,
) -> OperationList:
    scope = _scope(admin)
    if scope is not None and tenant_id not in (None, scope):
        return OperationList(operations=[])
    found = await services.operations.list(tenant_id=tenant_id or scope)
    return OperationList(operations=[_public(o) for o in found])


@router.get("/operations/{operation_id}")
async def read_operation(
    operation_id: str, services: ServicesDep, admin: AdminDep
) -> OperationPublic:
    found = await services.operations.get(operation_id=operation_id, tenant_id=_scope(admin))
    return _public(found)


@router.get("/operations/{operation_id}/result")
async def operation_result(
    operation_id: str, services: ServicesDep, admin: AdminDep
) -> dict[str, Any]:
    """An export's document, as a file to keep."""
    result = await services.operations.result(operation_id=operation_id, tenant_id=_scope(admin))
    return result
