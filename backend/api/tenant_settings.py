"""`/api/admin/tenants/{id}/settings`: a tenant's settings key by key, with where each comes
from, and edits of single keys validated exactly like config.yaml (operator only)."""

from __future__ import annotations

from fastapi import APIRouter

from backend.api.admin import check_runtime, require_operator, run_bots
from backend.api.auth import AdminDep
from backend.api.console_schemas import (
    SettingFieldPublic,
    TenantSettingsPublic,
    TenantSettingsUpdate,
)
from backend.api.deps import ChannelsDep, ServicesDep
from backend.composition.services import Services
from backend.storage.tenants import Tenant
from backend.tenancy.settings_fields import fields, with_values

router = APIRouter(prefix="/api/admin/tenants", tags=["admin"])


def _public(services: Services, tenant: Tenant) -> TenantSettingsPublic:
    found = fields(services.settings, tenant.id, tenant.settings)
    return TenantSettingsPublic(
        tenant_id=tenant.id,
        fields=[SettingFieldPublic.model_validate(field, from_attributes=True) for field in found],
    )


@router.get("/{tenant_id}/settings")
async def read_settings(
    tenant_id: str, services: ServicesDep, admin: AdminDep
) -> TenantSettingsPublic:
    require_operator(admin)
    return _public(services, await services.tenants.get(tenant_id=tenant_id))


@router.patch("/{tenant_id}/settings")
async def update_settings(
    tenant_id: str,
    body: TenantSettingsUpdate,
    services: ServicesDep,
    channels: ChannelsDep,
    admin: AdminDep,
) -> TenantSettingsPublic:
    """Set (or, with null, drop) single keys; the tenant's next turn uses them. Nothing
    changes when any of them is invalid."""
    require_operator(admin)
    tenant = await services.tenants.get(tenant_id=tenant_id)
    stored = with_values(tenant.settings, body.values)
    await check_runtime(services, channels, tenant_id, stored)
    tenant = await services.tenants.update(tenant_id=tenant_id, settings=stored)
    await run_bots(services, channels, tenant)
    await services.audit.record(
        tenant_id=tenant.id,
        actor_key_id=admin.key_id,
        action="tenant.settings",
        detail={
            "set": sorted(k for k, v in body.values.items() if v is not None),
            "reset": sorted(k for k, v in body.values.items() if v is None),
        },
    )
    return _public(services, tenant)
