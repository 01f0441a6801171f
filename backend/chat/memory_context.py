"""Which memory entries reach the model: the most relevant to the new message and the most
recent, within a token budget. Provenance is stripped: the model needs the fact, not the ids."""

from __future__ import annotations

import logging

from backend.chat.memory_health import MemoryHealth
from backend.chat.tokens import TokenCounter
from backend.memory.base import MemoryStore, MemoryUnavailable
from backend.memory.entries import MemoryEntry, format_line

log = logging.getLogger(__name__)


class MemoryContext:
    def __init__(
        self,
        store: MemoryStore,
        counter: TokenCounter,
        *,
        budget_tokens: int,
        health: MemoryHealth | None = None,
        relevant: int = 12,
        recent: int = 12,
    ) -> None:
        self.store = store
        self._health = health or MemoryHealth()
        self._counter = counter
        self._budget_tokens = budget_tokens
        self._relevant = relevant
        self._recent = recent

    async def lines(self, *, tenant_id: str, scope_key: str, query: str) -> list[str]:
        """Prompt lines `date|source|content`, relevant ones first, then recent, in budget.

        Memory that cannot be read leaves the prompt without it: the user still gets a reply.
        """
        if self._budget_tokens <= 0:
            return []
        try:
            relevant = await self.store.search(
                tenant_id=tenant_id, scope_key=scope_key, query=query, limit=self._relevant
            )
            recent = await self.store.recent(
                tenant_id=tenant_id, scope_key=scope_key, limit=self._recent
            )
        except MemoryUnavailable as exc:
            log.warning(
                "memory left out of the prompt: %s", exc.message, extra={"tenant": tenant_id}
            )
            self._health.memory_unreadable(tenant_id, scope_key, exc.message)
            return []
        self._health.memory_readable(tenant_id, scope_key)
        chosen: dict[str, MemoryEntry] = {}
        for entry in [*relevant, *reversed(recent)]:
            chosen.setdefault(entry.id, entry)
        lines, used = [], 0
        for entry in chosen.values():
            line = format_line(entry.date, entry.source_kind, entry.current_content)
            cost = self._counter.count(line) + 1
            if used + cost > self._budget_tokens:
                continue  # a smaller line after it may still fit
            lines.append(line)
            used += cost
        return lines
