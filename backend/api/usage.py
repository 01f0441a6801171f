"""Usage: a tenant reads its own accounting; the operator reads every tenant's, also as CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response

from backend.api.auth import AdminDep, TenantDep
from backend.api.deps import ServicesDep
from backend.api.usage_schemas import UsageDayPublic, UsageList
from backend.storage.usage import UsageDay

router = APIRouter(tags=["usage"])
Days = Annotated[int, Query(ge=1, le=366)]
CSV_COLUMNS = (
    "tenant_id",
    "day",
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "summarizer_calls",
    "summarizer_tokens",
    "estimated_cost",
    "unpriced_calls",
)


def _estimated_cost(day: UsageDay) -> float | None:
    if day.cost_micros == 0 and day.unpriced_calls:
        return None  # nothing of the day had a price: unknown, not free
    return day.cost_micros / 1_000_000


def usage_list(days: list[UsageDay], currency: str) -> UsageList:
    return UsageList(
        currency=currency,
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
                summarizer_calls=d.summarizer_calls,
                estimated_cost=_estimated_cost(d),
                unpriced_calls=d.unpriced_calls,
            )
            for d in days
        ],
    )


def _since(days: int) -> datetime:
    return datetime.now(UTC) - timedelta(days=days - 1)


async def _admin_usage(services: ServicesDep, admin: AdminDep, days: int) -> UsageList:
    tenant_id = None if admin.is_operator else admin.tenant_id
    found = await services.usage.days(tenant_id=tenant_id, since=_since(days).date())
    return usage_list(found, services.settings.pricing.currency)


@router.get("/api/usage")
async def tenant_usage(services: ServicesDep, tenant_id: TenantDep, days: Days = 30) -> UsageList:
    found = await services.usage.days(tenant_id=tenant_id, since=_since(days).date())
    return usage_list(found, services.settings.pricing.currency)


@router.get("/api/admin/usage")
async def all_usage(services: ServicesDep, admin: AdminDep, days: Days = 30) -> UsageList:
    return await _admin_usage(services, admin, days)


@router.get(
    "/api/admin/usage.csv",
    response_class=Response,
    responses={200: {"content": {"text/csv": {}}}},
)
async def all_usage_csv(services: ServicesDep, admin: AdminDep, days: Days = 30) -> Response:
    """The same rows as `/api/admin/usage`, one per tenant and day, for a spreadsheet."""
    usage = await _admin_usage(services, admin, days)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for day in usage.days:
        row = day.model_dump()
        writer.writerow(["" if row[c] is None else row[c] for c in CSV_COLUMNS])
    today = datetime.now(UTC).date().isoformat()
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="tally-usage-{today}.csv"'},
    )
