"""`GET /api/health`: liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backend.api.auth import DEFAULT_TENANT
from backend.api.deps import ServicesDep
from backend.api.schemas import HealthPublic

router = APIRouter(tags=["health"])

DEMO_NOTICE = (
    "No LLM provider key is configured: Tally answers with its built-in demo provider. "
    "Set OPENAI_API_KEY (or edit config.yaml) to talk to a real model."
)


@router.get("/api/health")
async def health(services: ServicesDep, response: Response) -> HealthPublic:
    try:
        async with services.database.read() as conn:
            await conn.execute(text("SELECT 1"))
        database = "ok"
    except (SQLAlchemyError, OSError):
        database = "unavailable"
    if database != "ok":
        response.status_code = 503
    runtime = await services.runtimes.get(DEFAULT_TENANT)
    return HealthPublic(
        status="ok" if database == "ok" else "degraded",
        database=database,
        provider=runtime.model.provider,
        model=runtime.model.name,
        is_demo=runtime.is_demo,
        notice=DEMO_NOTICE if runtime.is_demo else None,
    )
