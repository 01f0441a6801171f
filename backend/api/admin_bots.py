"""`POST /api/admin/tenants/{id}/bots/{bot}/restart`: the operator (or the tenant's admin)
restarts one bot, as this process runs it, and reads its state after."""

from __future__ import annotations

from fastapi import APIRouter

from backend.api.admin import own_tenant
from backend.api.auth import AdminDep
from backend.api.deps import ChannelsDep, ServicesDep
from backend.api.health import channel_health
from backend.api.health_schemas import ChannelHealthPublic

router = APIRouter(prefix="/api/admin/tenants", tags=["admin"])


@router.post("/{tenant_id}/bots/{bot}/restart")
async def restart_bot(
    tenant_id: str, bot: str, services: ServicesDep, channels: ChannelsDep, admin: AdminDep
) -> ChannelHealthPublic:
    own_tenant(admin, tenant_id)
    status = await channels.restart(tenant_id, bot)
    await services.audit.record(
        tenant_id=tenant_id, actor_key_id=admin.key_id, action="bot.restart", target=bot
    )
    return channel_health(status)
