"""`tally tenants create | list | disable | enable` and `tally keys create | list | revoke`;
each change is in the audit log as the operator's."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from backend.settings import Settings
from backend.storage.audit import AuditLog
from backend.storage.database import open_database
from backend.storage.migrate import migrate
from backend.storage.tenants import ApiKeyRepository, TenantRepository
from backend.tenancy.admin import create_key, create_tenant


@asynccontextmanager
async def _repositories(
    settings: Settings,
) -> AsyncIterator[tuple[TenantRepository, ApiKeyRepository, AuditLog]]:
    database = open_database(settings.database)
    try:
        await migrate(database)
        yield TenantRepository(database), ApiKeyRepository(database), AuditLog(database)
    finally:
        await database.dispose()


async def run_tenants_command(settings: Settings, args: argparse.Namespace) -> int:
    async with _repositories(settings) as (tenants, _, audit):
        if args.action == "create":
            overrides = json.loads(args.settings) if args.settings else {}
            tenant = await create_tenant(
                tenants,
                settings,
                audit,
                tenant_id=args.tenant_id,
                name=args.name,
                overrides=overrides,
                actor_key_id=None,
            )
            print(f"created tenant {tenant.id} ({tenant.name})")
        elif args.action == "list":
            for tenant in await tenants.list_all():
                state = "disabled" if tenant.is_disabled else "active"
                print(f"{tenant.id}\t{state}\t{tenant.name}")
        elif args.action == "disable":
            await tenants.update(tenant_id=args.tenant_id, disabled_at=datetime.now(UTC))
            await audit.record(tenant_id=args.tenant_id, actor_key_id=None, action="tenant.disable")
            print(
                f"disabled tenant {args.tenant_id}: its keys stop working now"
                f" (`tally tenants enable {args.tenant_id}` undoes it)"
            )
        else:
            await tenants.update(tenant_id=args.tenant_id, disabled_at=None)
            await audit.record(tenant_id=args.tenant_id, actor_key_id=None, action="tenant.enable")
            print(f"enabled tenant {args.tenant_id}: its keys work again")
    return 0


async def run_keys_command(settings: Settings, args: argparse.Namespace) -> int:
    async with _repositories(settings) as (tenants, keys, audit):
        if args.action == "create":
            record, key = await create_key(
                tenants,
                keys,
                audit,
                tenant_id=args.target,
                scope=args.scope,
                label=args.label,
                actor_key_id=None,
            )
            print(f"{record.id} ({record.scope}) for tenant {record.tenant_id}:")
            print(key)
            print("This key is shown once: store it now. Tally keeps only its hash.")
        elif args.action == "list":
            for record in await keys.list(tenant_id=args.target):
                state = "revoked" if record.revoked_at else "active"
                used = record.last_used_at.isoformat() if record.last_used_at else "never"
                print(f"{record.id}\t{record.scope}\t{state}\tlast used {used}\t{record.label}")
        else:
            owner = await keys.revoke(key_id=args.target)
            await audit.record(
                tenant_id=owner, actor_key_id=None, action="key.revoke", target=args.target
            )
            print(f"revoked {args.target}")
    return 0
