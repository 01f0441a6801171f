"""`GET /api/health`: liveness and readiness, and each provider's latest call.

Health never calls a provider: it reports the outcome of the latest real call, so a probe
every few seconds costs no tokens and cannot be rate limited."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Response
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backend.api.auth import OptionalPrincipalDep
from backend.api.deps import ChannelsDep, ServicesDep
from backend.api.errors import retry_after_header
from backend.api.health_schemas import (
    ChannelHealthPublic,
    HealthPublic,
    McpServerHealthPublic,
    MemoryProblemPublic,
    ProviderHealthPublic,
)
from backend.channels.base import ChannelStatus
from backend.chat.runtime import TenantRuntime
from backend.composition.services import Services
from backend.domain.tenants import DEFAULT_TENANT
from backend.domain.wording import count
from backend.errors import StorageUnavailable
from backend.providers.endpoints import base_url, display_url
from backend.providers.outcomes import Outcome
from backend.settings import ProviderSettings
from backend.storage.faults import as_storage_fault
from backend.tenancy.keys import Principal

router = APIRouter(tags=["health"])

DEMO_NOTICE = (
    "No LLM provider key is configured: Tally answers with its built-in demo provider and "
    "keeps a window of {window} messages, so you can watch older turns move into memory. "
    "To talk to a real model, {hint}."
)


def demo_notice(hint: str | None, window: int) -> str:
    return DEMO_NOTICE.format(window=window, hint=hint or "set the key your config names")


@router.get("/api/health")
async def health(
    services: ServicesDep,
    channels: ChannelsDep,
    response: Response,
    caller: OptionalPrincipalDep,
) -> HealthPublic:
    database, database_problem = "ok", services.database.write_fault
    try:
        async with services.database.read() as conn:
            await conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as exc:
        fault = as_storage_fault(exc)
        database_problem = fault.message if fault else type(exc).__name__
    if database_problem is not None:  # unreachable, or reads work but writes fail
        database = "unavailable"
        response.headers.update(retry_after_header(StorageUnavailable.retry_after))
    if database != "ok":
        response.status_code = 503  # a failing provider leaves the server alive: still 200
    runtime = await services.runtimes.get(DEFAULT_TENANT)
    window = runtime.settings.persona.max_history_messages
    outcomes = services.provider_outcomes
    latest = outcomes.latest(runtime.model.provider)
    is_provider_failing = latest is not None and not latest.is_ok
    coordination_problem = await services.coordinator.problem()
    problems = await memory_problems(services) if database == "ok" else []
    is_ok = (
        database == "ok"
        and not is_provider_failing
        and coordination_problem is None
        and not problems
    )
    return HealthPublic(
        status="ok" if is_ok else "degraded",
        database=database,
        database_problem=database_problem,
        coordination=services.coordinator.kind,
        coordination_problem=coordination_problem,
        provider=runtime.model.provider,
        model=runtime.model.name,
        providers=[
            _provider_health(name, settings, outcomes.latest(name))
            for name, settings in runtime.settings.providers.items()
        ],
        is_demo=runtime.is_demo,
        notice=demo_notice(runtime.demo_hint, window) if runtime.is_demo else None,
        demo_key_env=runtime.demo_key_env,
        demo_window=window if runtime.is_demo else None,
        demo_config_file=_config_file(services) if runtime.is_demo else None,
        assistant_name=(await _own_runtime(services, caller, runtime)).settings.persona.name,
        channels=[channel_health(s) for s in channels.statuses() if _may_see(caller, s)],
        mcp_servers=[
            McpServerHealthPublic(
                tenant_id=c.tenant_id,
                server=c.name,
                connected=c.is_connected,
                tools=len(c.tools),
                problem=c.problem,
            )
            for c in services.mcp.connections()
            if _may_see_tenant(caller, c.tenant_id)
        ],
        memory_scope=runtime.settings.memory.scope,
        confirm_writes=runtime.settings.memory.confirm_writes,
        memory="degraded" if problems else "ok",
        memory_problem=_count(problems) if problems else None,
        memory_problems=[p for p in problems if _may_see_tenant(caller, p.tenant_id)],
    )


async def memory_problems(services: Services) -> list[MemoryProblemPublic]:
    """Summaries failing in any process (journaled in the database), and memories this
    process could not read at its last try."""
    failing = [
        MemoryProblemPublic(
            tenant_id=job.tenant_id,
            session_id=job.session_id,
            code="summaries_failing",
            reason=f"{count(job.attempts, 'failed attempt')} to summarize messages "
            f"#{job.first_message_id}–#{job.last_message_id}",
        )
        for job in await services.overflow_jobs.failing()
    ]
    unreadable = [
        MemoryProblemPublic(tenant_id=tenant_id, code="memory_unreadable", reason=p.reason)
        for tenant_id, p in services.memory_health.unreadable()
    ]
    return failing + unreadable


def _count(problems: list[MemoryProblemPublic]) -> str:
    failing = sum(p.code == "summaries_failing" for p in problems)
    unreadable = len(problems) - failing
    parts = [f"summaries failing in {count(failing, 'session')}"] if failing else []
    parts += [f"{count(unreadable, 'memory file')} unreadable"] if unreadable else []
    return "; ".join(parts)


def _config_file(services: Services) -> str | None:
    """The config file the server read (None: the built-in defaults), for the demo notice."""
    source = services.settings.source
    return source if Path(source).is_file() else None


async def _own_runtime(
    services: Services, caller: Principal | None, default: TenantRuntime
) -> TenantRuntime:
    """The caller's tenant's runtime: its persona names the assistant on the page."""
    if caller is None or caller.is_operator or caller.tenant_id == DEFAULT_TENANT:
        return default
    return await services.runtimes.get(caller.tenant_id)


def _may_see(caller: Principal | None, status: ChannelStatus) -> bool:
    """Bots are the operator's to see, and a tenant admin's own; health is public."""
    return _may_see_tenant(caller, status.tenant_id)


def _may_see_tenant(caller: Principal | None, tenant_id: str) -> bool:
    if caller is None or caller.scope != "admin":
        return False
    return caller.is_operator or caller.tenant_id == tenant_id


def channel_health(status: ChannelStatus) -> ChannelHealthPublic:
    return ChannelHealthPublic(
        tenant_id=status.tenant_id,
        bot=status.bot,
        kind=status.kind,
        mode=status.mode,
        connected=status.is_connected,
        leading=status.is_leader,
        last_update_at=status.last_update_at,
        last_error=status.last_error,
        last_error_at=status.last_error_at,
    )


def _provider_health(
    name: str, settings: ProviderSettings, latest: Outcome | None
) -> ProviderHealthPublic:
    url = base_url(settings)
    shown_url = display_url(url) if url else None
    if latest is None:
        return ProviderHealthPublic(name=name, base_url=shown_url, last_outcome="unknown")
    return ProviderHealthPublic(
        name=name,
        base_url=shown_url,
        last_outcome="ok" if latest.is_ok else "error",
        last_error_code=latest.error_code,
        last_error=latest.error,
        last_at=latest.at,
    )
