"""The operator's view of memory: per tenant, how many lines, when the summarizer last
distilled, whether it is degraded and why; and one tenant's memory, read as its admin."""

from __future__ import annotations

from collections import defaultdict

from fastapi import APIRouter

from backend.api.admin import own_tenant
from backend.api.auth import AdminDep
from backend.api.console_schemas import MemoryHealthList, TenantMemoryHealthPublic
from backend.api.deps import ServicesDep
from backend.api.health import memory_problems
from backend.api.health_schemas import MemoryProblemPublic
from backend.api.memory import UserScope, memory_public
from backend.api.schemas import MemoryPublic
from backend.memory.base import MemoryUnavailable
from backend.operations.runner import memory_scopes

router = APIRouter(prefix="/api/admin", tags=["admin"])


@router.get("/memory-health")
async def memory_health(services: ServicesDep, admin: AdminDep) -> MemoryHealthList:
    if admin.is_operator:
        tenant_ids = [t.id for t in await services.tenants.list_all()]
    else:
        tenant_ids = [admin.tenant_id]
    problems: defaultdict[str, list[MemoryProblemPublic]] = defaultdict(list)
    for problem in await memory_problems(services):
        problems[problem.tenant_id].append(problem)
    compacted = await services.overflow_jobs.last_done()
    found = []
    for tenant_id in tenant_ids:
        scopes = await memory_scopes(services, tenant_id)
        lines: int | None = 0
        for scope in scopes:
            try:
                document = await services.memory.read(tenant_id=tenant_id, scope_key=scope)
            except MemoryUnavailable as exc:  # the view still answers, naming the memory
                lines = None
                problem = MemoryProblemPublic(
                    tenant_id=tenant_id, code="memory_unreadable", reason=exc.message
                )
                if problem not in problems[tenant_id]:
                    problems[tenant_id].append(problem)
                break
            lines = (lines or 0) + len(document.entries)
        runtime = await services.runtimes.get(tenant_id)
        found.append(
            TenantMemoryHealthPublic(
                tenant_id=tenant_id,
                scope=runtime.settings.memory.scope,
                memories=len(scopes),
                lines=lines,
                last_compaction_at=compacted.get(tenant_id),
                status="degraded" if problems[tenant_id] else "ok",
                problems=problems[tenant_id],
            )
        )
    return MemoryHealthList(tenants=found)


@router.get("/tenants/{tenant_id}/memory")
async def tenant_memory(
    tenant_id: str, services: ServicesDep, admin: AdminDep, user: UserScope = ""
) -> MemoryPublic:
    own_tenant(admin, tenant_id)
    await services.tenants.get(tenant_id=tenant_id)
    return memory_public(await services.memory.read(tenant_id=tenant_id, scope_key=user))
