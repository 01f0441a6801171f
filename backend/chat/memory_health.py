"""Whether memory works, as this process sees it: sessions whose summaries keep failing (their
older turns wait to be remembered, and may leave the request before they are), and memory that
cannot be read (the prompt goes without it). A turn tells its client; `/metrics` counts them per
tenant; `/api/health` adds the failing summaries every process journaled in the database."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.wording import count
from backend.metrics.registry import MEMORY_DEGRADED


@dataclass(frozen=True, slots=True)
class MemoryProblem:
    code: str  # summaries_failing | memory_unreadable
    reason: str


class MemoryHealth:
    def __init__(self) -> None:
        self._failing: dict[tuple[str, str], MemoryProblem] = {}  # (tenant, session)
        self._unreadable: dict[tuple[str, str], MemoryProblem] = {}  # (tenant, scope)

    def summaries_failing(
        self, tenant_id: str, session_id: str, *, attempts: int, error: str
    ) -> None:
        reason = (
            "summarizing this conversation's older turns failed "
            f"{count(attempts, 'time')} ({error}); they are kept"
            " and will be remembered once it succeeds"
        )
        self._failing[(tenant_id, session_id)] = MemoryProblem("summaries_failing", reason)
        self._count(tenant_id)

    def summaries_recovered(self, tenant_id: str, session_id: str) -> None:
        if self._failing.pop((tenant_id, session_id), None) is not None:
            self._count(tenant_id)

    def memory_unreadable(self, tenant_id: str, scope_key: str, error: str) -> None:
        reason = f"long-term memory could not be read ({error}); this reply goes without it"
        self._unreadable[(tenant_id, scope_key)] = MemoryProblem("memory_unreadable", reason)
        self._count(tenant_id)

    def memory_readable(self, tenant_id: str, scope_key: str) -> None:
        if self._unreadable.pop((tenant_id, scope_key), None) is not None:
            self._count(tenant_id)

    def problem_for(self, tenant_id: str, session_id: str, scope_key: str) -> MemoryProblem | None:
        """What a turn of this session should tell its client, if anything."""
        return self._unreadable.get((tenant_id, scope_key)) or self._failing.get(
            (tenant_id, session_id)
        )

    def unreadable(self) -> list[tuple[str, MemoryProblem]]:
        """(tenant, problem) of every memory this process could not read at its last try."""
        return [(tenant_id, problem) for (tenant_id, _), problem in self._unreadable.items()]

    def _count(self, tenant_id: str) -> None:
        count = sum(key[0] == tenant_id for key in self._failing) + sum(
            key[0] == tenant_id for key in self._unreadable
        )
        MEMORY_DEGRADED.labels(tenant_id).set(count)
