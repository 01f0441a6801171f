"""Usage: a tenant reads its own accounting; the operator reads every tenant's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from backend.api.auth import AdminDep, TenantDep
from backend.api.deps import ServicesDep
from backend.api.schemas import UsageDayPublic, UsageList
from backend.storage.usage import UsageDay

router = APIRouter(tags=["usage"])
Days = Annotated[int, Query(ge=1, le=366)]


def usage_list(days: list[UsageDay]) -> UsageList:
    return UsageList(
        days=[
            UsageDayPublic(
                tenant_id=d.tenant_id,
                day=d.day,
                turns=d.turns,
                prompt_tokens=d.prompt_tokens,
                completion_tokens=d.completion_tokens,
                summarizer_tokens=d.summarizer_tokens,
                cached_tokens=d.cached_tokens,
                cache_write_tokens=d.cache_write_tokens,
            )
            for d in days
        ]
    )


def _since(days: int) -> datetime:
    return datetime.now(UTC) - timedelta(days=days - 1)


@router.get("/api/usage")
async def tenant_usage(services: ServicesDep, tenant_id: TenantDep, days: Days = 30) -> UsageList:
    return usage_list(await services.usage.days(tenant_id=tenant_id, since=_since(days).date()))


@router.get("/api/admin/usage")
async def all_usage(services: ServicesDep, admin: AdminDep, days: Days = 30) -> UsageList:
    tenant_id = None if admin.is_operator else admin.tenant_id
    return usage_list(await services.usage.days(tenant_id=tenant_id, since=_since(days).date()))
