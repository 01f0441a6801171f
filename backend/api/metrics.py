"""`GET /metrics`: Prometheus text format. Open with `auth.mode: none`; the operator's key
with `auth.mode: keys` (per-tenant figures are the operator's to see)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from backend.api.auth import AdminDep, Forbidden
from backend.metrics.registry import render

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response)
async def metrics(admin: AdminDep) -> Response:
    if not admin.is_operator:
        raise Forbidden("metrics cover every tenant: use the operator key")
    return Response(render(), media_type=CONTENT_TYPE_LATEST)
