"""Which memory entries reach the model: the most relevant to the new message and the most
recent, within a token budget. Provenance is stripped: the model needs the fact, not the ids."""

from __future__ import annotations

from backend.chat.tokens import TokenCounter
from backend.memory.base import MemoryStore
from backend.memory.entries import MemoryEntry, format_line


class MemoryContext:
    def __init__(
        self,
        store: MemoryStore,
        counter: TokenCounter,
        *,
        budget_tokens: int,
        relevant: int = 12,
        recent: int = 12,
    ) -> None:
        self.store = store
        self._counter = counter
        self._budget_tokens = budget_tokens
        self._relevant = relevant
        self._recent = recent

    async def lines(self, *, tenant_id: str, scope_key: str, query: str) -> list[str]:
        """Prompt lines `date|source|content`, relevant ones first, then recent, in budget."""
        if self._budget_tokens <= 0:
            return []
        relevant = await self.store.search(
            tenant_id=tenant_id, scope_key=scope_key, query=query, limit=self._relevant
        )
        recent = await self.store.recent(
            tenant_id=tenant_id, scope_key=scope_key, limit=self._recent
        )
        chosen: dict[str, MemoryEntry] = {}
        for entry in [*relevant, *reversed(recent)]:
            chosen.setdefault(entry.id, entry)
        lines, used = [], 0
        for entry in chosen.values():
            line = format_line(entry.date, entry.source_kind, entry.content)
            cost = self._counter.count(line) + 1
            if used + cost > self._budget_tokens:
                break
            lines.append(line)
            used += cost
        return lines
