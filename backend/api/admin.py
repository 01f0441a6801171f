"""Administration: tenants (operator) and API keys (operator, or a tenant's admin key for its
own tenant). Another tenant's id answers exactly like an id that does not exist."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from backend.api.auth import AdminDep, Forbidden
from backend.api.deps import ChannelsDep, ServicesDep
from backend.api.schemas import (
    AuditEntryPublic,
    AuditList,
    KeyCreate,
    KeyCreated,
    KeyList,
    KeyPublic,
    TenantCreate,
    TenantList,
    TenantPublic,
    TenantUpdate,
)
from backend.channels.bot_runner import BotRunner
from backend.composition.services import Services
from backend.errors import ConfigError, InvalidInput
from backend.storage.tenants import ApiKeyRecord, Tenant, TenantNotFound
from backend.tenancy.admin import create_key, create_tenant, refuse_file_only
from backend.tenancy.keys import Principal

router = APIRouter(prefix="/api/admin", tags=["admin"])


def tenant_public(tenant: Tenant, last_key_created_at: datetime | None = None) -> TenantPublic:
    return TenantPublic(
        id=tenant.id,
        name=tenant.name,
        settings=tenant.settings,
        created_at=tenant.created_at,
        disabled_at=tenant.disabled_at,
        last_key_created_at=last_key_created_at,
    )


def key_public(record: ApiKeyRecord) -> KeyPublic:
    return KeyPublic(
        id=record.id,
        tenant_id=record.tenant_id,
        prefix=record.prefix,
        scope=record.scope,
        label=record.label,
        created_at=record.created_at,
        last_used_at=record.last_used_at,
        revoked_at=record.revoked_at,
    )


def require_operator(admin: Principal) -> None:
    if not admin.is_operator:
        raise Forbidden("only the operator (TALLY_ADMIN_KEY) manages tenants", code="operator_only")


def own_tenant(admin: Principal, tenant_id: str) -> None:
    if not admin.is_operator and admin.tenant_id != tenant_id:
        raise TenantNotFound(f"tenant {tenant_id!r} does not exist")


async def check_runtime(
    services: Services, channels: BotRunner, tenant_id: str, overrides: dict[str, Any]
) -> None:
    """Refuse settings that are invalid, that the tenant's runtime could not run with, or
    whose bots could not run (a token unset, or another bot's)."""
    refuse_file_only(overrides)
    try:
        effective = await services.runtimes.check(tenant_id, overrides)
        channels.check(tenant_id, effective.channels)
    except ConfigError as exc:
        raise InvalidInput(exc.message, code="invalid_settings") from exc


async def run_bots(services: Services, channels: BotRunner, tenant: Tenant) -> None:
    """The tenant's bots as its settings now say: none while it is disabled."""
    services.runtimes.invalidate(tenant.id)
    bots = {} if tenant.is_disabled else (await services.runtimes.get(tenant.id)).settings.channels
    await channels.apply(tenant.id, bots)


@router.post("/tenants", status_code=201)
async def create_tenant_route(
    body: TenantCreate, services: ServicesDep, channels: ChannelsDep, admin: AdminDep
) -> TenantPublic:
    require_operator(admin)
    await check_runtime(services, channels, body.id, body.settings)
    tenant = await create_tenant(
        services.tenants,
        services.settings,
        services.audit,
        tenant_id=body.id,
        name=body.name,
        overrides=body.settings,
        actor_key_id=admin.key_id,
    )
    await run_bots(services, channels, tenant)
    return tenant_public(tenant)


@router.get("/tenants")
async def list_tenants(services: ServicesDep, admin: AdminDep) -> TenantList:
    if admin.is_operator:
        tenants = await services.tenants.list_all()
    else:
        tenants = [await services.tenants.get(tenant_id=admin.tenant_id)]
    newest = await services.api_keys.newest_by_tenant()
    return TenantList(
        tenants=[tenant_public(t, newest.get(t.id)) for t in tenants],
        is_operator=admin.is_operator,
    )


@router.patch("/tenants/{tenant_id}")
async def update_tenant(
    tenant_id: str,
    body: TenantUpdate,
    services: ServicesDep,
    channels: ChannelsDep,
    admin: AdminDep,
) -> TenantPublic:
    require_operator(admin)
    values: dict[str, object] = {}
    if body.name is not None:
        values["name"] = body.name
    if body.settings is not None:
        await check_runtime(services, channels, tenant_id, body.settings)
        values["settings"] = body.settings
    if body.disabled is not None:
        values["disabled_at"] = datetime.now(UTC) if body.disabled else None
    tenant = await services.tenants.update(tenant_id=tenant_id, **values)
    await run_bots(services, channels, tenant)
    if body.disabled:
        services.authenticator.notice_revocation()  # its turns in flight end now
    action = "tenant.update"
    if body.disabled is not None:
        action = "tenant.disable" if body.disabled else "tenant.enable"
    changed = {"renamed": body.name is not None, "settings": sorted(body.settings or {})}
    await services.audit.record(
        tenant_id=tenant.id, actor_key_id=admin.key_id, action=action, detail=changed
    )
    return tenant_public(tenant)


@router.post("/tenants/{tenant_id}/keys", status_code=201)
async def create_key_route(
    tenant_id: str, body: KeyCreate, services: ServicesDep, admin: AdminDep
) -> KeyCreated:
    own_tenant(admin, tenant_id)
    record, key = await create_key(
        services.tenants,
        services.api_keys,
        services.audit,
        tenant_id=tenant_id,
        scope=body.scope,
        label=body.label,
        actor_key_id=admin.key_id,
    )
    return KeyCreated(**key_public(record).model_dump(), key=key)


@router.get("/tenants/{tenant_id}/keys")
async def list_keys(tenant_id: str, services: ServicesDep, admin: AdminDep) -> KeyList:
    own_tenant(admin, tenant_id)
    await services.tenants.get(tenant_id=tenant_id)
    records = await services.api_keys.list(tenant_id=tenant_id)
    return KeyList(keys=[key_public(r) for r in records])


@router.delete("/keys/{key_id}", status_code=204)
async def revoke_key(key_id: str, services: ServicesDep, admin: AdminDep) -> Response:
    tenant_id = None if admin.is_operator else admin.tenant_id
    owner = await services.api_keys.revoke(key_id=key_id, tenant_id=tenant_id)
    services.authenticator.notice_revocation()  # its turns in flight end now
    await services.audit.record(
        tenant_id=owner, actor_key_id=admin.key_id, action="key.revoke", target=key_id
    )
    return Response(status_code=204)


@router.get("/audit")
async def read_audit(
    services: ServicesDep,
    admin: AdminDep,
    tenant_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before_id: Annotated[int | None, Query(ge=1)] = None,
) -> AuditList:
    """What administrators did, newest first: the operator sees every tenant's (or the one
    named), a tenant's admin key its own tenant's only (another named: none)."""
    if not admin.is_operator:
        if tenant_id not in (None, admin.tenant_id):
            return AuditList(entries=[])
        tenant_id = admin.tenant_id
    found = await services.audit.entries(tenant_id=tenant_id, limit=limit, before_id=before_id)
    return AuditList(entries=[AuditEntryPublic(**asdict(entry)) for entry in found])
