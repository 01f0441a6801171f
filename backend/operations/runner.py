"""Long administrative operations the console starts and watches: re-summarize a tenant's
raw memory lines, export its memory. Each runs as a task of this process and writes its
progress to `admin_operations`, which any worker answers the console's polls from."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from backend.composition.services import Services
from backend.domain.wording import count
from backend.operations.resummarize import resummarize
from backend.storage.admin_operations import Operation, OperationKind

log = logging.getLogger(__name__)


async def memory_scopes(services: Services, tenant_id: str) -> list[str]:
    """The tenant's memories: the shared one, and one per end user its sessions name (when
    memory is kept per person; linked identities are one memory, read once)."""
    runtime = await services.runtimes.get(tenant_id)
    if runtime.settings.memory.scope != "user":
        return [""]
    scopes: dict[str, str] = {}
    for user in ["", *await services.sessions.user_keys(tenant_id=tenant_id)]:
        scopes.setdefault(await services.memory.scope_of(tenant_id=tenant_id, scope_key=user), user)
    return list(scopes.values())


class AdminOperations:
    def __init__(self, services: Services) -> None:
        self._services = services
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, *, tenant_id: str, kind: OperationKind) -> Operation:
        operation = await self._services.operations.start(tenant_id=tenant_id, kind=kind)
        work = self._export if kind == "export" else self._resummarize
        self._run(operation, work(operation))
        return operation

    async def wait_idle(self) -> None:
        """Until every operation this process started has ended (tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _run(self, operation: Operation, work: Coroutine[Any, Any, None]) -> None:
        async def guarded() -> None:
            try:
                await work
            except asyncio.CancelledError:
                await self._services.operations.finish(
                    operation.id, state="failed", message="stopped: the server shut down"
                )
                raise
            except Exception as exc:  # the operation failed, not the server: say why
                log.exception("operation %s (%s) failed", operation.id, operation.kind)
                await self._services.operations.finish(
                    operation.id, state="failed", message=f"{type(exc).__name__}: {exc}"
                )

        task = asyncio.create_task(guarded(), name=f"operation {operation.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _export(self, operation: Operation) -> None:
        tenant_id, repo = operation.tenant_id, self._services.operations
        scopes = await memory_scopes(self._services, tenant_id)
        exported: list[dict[str, Any]] = []
        lines = 0
        for done, scope in enumerate(scopes, start=1):
            document = await self._services.memory.read(tenant_id=tenant_id, scope_key=scope)
            lines += len(document.entries)
            exported.append(
                {
                    "user": scope or None,
                    "entries": [
                        {"id": e.id, "date": str(e.date), "source": e.writer, "content": e.content}
                        for e in document.entries
                    ],
                }
            )
            await repo.progress(operation.id, done=done, total=len(scopes), message="")
        await repo.finish(
            operation.id,
            state="done",
            message=f"{count(lines, 'line')} of {count(len(scopes), 'memory', 'memories')}",
            result={
                "tenant_id": tenant_id,
                "exported_at": datetime.now(UTC).isoformat(),
                "memories": exported,
            },
        )

    async def _resummarize(self, operation: Operation) -> None:
        tenant_id, repo = operation.tenant_id, self._services.operations
        found = still_raw = 0
        failures: list[str] = []
        for scope in await memory_scopes(self._services, tenant_id):

            async def progress(handed: int, total: int, before: int = found) -> None:
                await repo.progress(
                    operation.id, done=before + handed, total=before + total, message=""
                )

            outcome = await resummarize(
                self._services, tenant_id=tenant_id, scope_key=scope, progress=progress
            )
            found, still_raw = found + outcome.found, still_raw + outcome.still_raw
            failures += outcome.failures
        message = f"re-summarized {found - still_raw} of {count(found, 'raw line')}"
        if failures:
            message += "; " + "; ".join(failures[:5])
        is_done = not still_raw and not failures
        await repo.finish(operation.id, state="done" if is_done else "failed", message=message)
