"""Tenant and key administration, shared by the admin API and the `tally` CLI; each creation
is in the audit log."""

from __future__ import annotations

from typing import Any

from backend.domain.tenants import TENANT_ID
from backend.errors import ConfigError, InvalidInput
from backend.settings import (
    Settings,
    file_only_problems,
    layered_overrides,
    tenant_settings,
)
from backend.storage.audit import AuditLog
from backend.storage.tenants import ApiKeyRecord, ApiKeyRepository, Tenant, TenantRepository
from backend.tenancy.keys import Scope, new_key


def refuse_file_only(overrides: dict[str, Any]) -> None:
    """InvalidInput for settings sent through the API or a command that only config.yaml may
    set (an MCP server's command runs on the operator's host)."""
    problems = file_only_problems(overrides)
    if problems:
        raise InvalidInput("; ".join(problems), code="invalid_settings")


def check_overrides(base: Settings, tenant_id: str, overrides: dict[str, Any]) -> None:
    """Validate a tenant's overrides exactly like config.yaml (InvalidInput names the key)."""
    refuse_file_only(overrides)
    try:
        tenant_settings(base, tenant_id, layered_overrides(base, tenant_id, overrides))
    except ConfigError as exc:
        raise InvalidInput(exc.message, code="invalid_settings") from exc


async def create_tenant(
    tenants: TenantRepository,
    base: Settings,
    audit: AuditLog,
    *,
    tenant_id: str,
    name: str,
    overrides: dict[str, Any],
    actor_key_id: str | None,
) -> Tenant:
    """A new tenant; `actor_key_id` is the admin key creating it (None: the operator)."""
    if not TENANT_ID.fullmatch(tenant_id):
        raise InvalidInput(
            "a tenant id is 1-64 lowercase letters, digits, '-' or '_'", code="invalid_tenant_id"
        )
    check_overrides(base, tenant_id, overrides)
    tenant = await tenants.create(tenant_id=tenant_id, name=name or tenant_id, settings=overrides)
    await audit.record(
        tenant_id=tenant.id,
        actor_key_id=actor_key_id,
        action="tenant.create",
        detail={"settings": sorted(overrides)},
    )
    return tenant


async def create_key(
    tenants: TenantRepository,
    keys: ApiKeyRepository,
    audit: AuditLog,
    *,
    tenant_id: str,
    scope: Scope,
    label: str,
    actor_key_id: str | None,
) -> tuple[ApiKeyRecord, str]:
    """A new key for an existing tenant: the record, and the key itself (shown once, so the
    audit log names it by id)."""
    await tenants.get(tenant_id=tenant_id)
    record, key = new_key(tenant_id=tenant_id, scope=scope, label=label)
    await keys.add(record)
    await audit.record(
        tenant_id=tenant_id,
        actor_key_id=actor_key_id,
        action="key.create",
        target=record.id,
        detail={"scope": record.scope, "label": record.label},
    )
    return record, key
