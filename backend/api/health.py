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
    "No LLM provider key is configured: Tally answers with its built-in demo provider and "
    "keeps a window of {window} messages, so you can watch older turns move into memory. "
    "{action} to talk to a real model."
)


def demo_notice(key_env: str | None, window: int) -> str:
    action = f"Set {key_env} and restart" if key_env else "Configure a model in config.yaml"
    return DEMO_NOTICE.format(window=window, action=action)


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
    window = runtime.settings.persona.max_history_messages
    return HealthPublic(
        status="ok" if database == "ok" else "degraded",
        database=database,
        provider=runtime.model.provider,
        model=runtime.model.name,
        is_demo=runtime.is_demo,
        notice=demo_notice(runtime.demo_key_env, window) if runtime.is_demo else None,
        demo_key_env=runtime.demo_key_env,
        demo_window=window if runtime.is_demo else None,
    )
