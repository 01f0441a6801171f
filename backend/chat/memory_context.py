"""Which memory entries reach the model, in two parts kept apart for the vendor's prompt cache:

- `standing`: the most recent entries. They depend on the memory alone, so they go into the
  system prompt and stay the same from turn to turn until memory is written.
- `relevant`: entries matching the new message that are not standing already. They change with
  every message, so they travel after the conversation, with the message itself.

Both share one token budget, half of it reserved for the relevant ones. Provenance is stripped:
the model needs the fact, not the ids.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from backend.chat.memory_health import MemoryHealth
from backend.chat.tokens import TokenCounter
from backend.memory.base import MemoryStore, MemoryUnavailable
from backend.memory.entries import MemoryEntry, format_line

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PromptMemory:
    """Prompt lines `date|source|content`: `standing` for the system prompt, `relevant` for
    the turn's context."""

    standing: list[str] = field(default_factory=list)
    relevant: list[str] = field(default_factory=list)


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

    async def lines(self, *, tenant_id: str, scope_key: str, query: str) -> PromptMemory:
        """The standing and the relevant lines, within the budget.

        Memory that cannot be read leaves the prompt without it: the user still gets a reply.
        """
        if self._budget_tokens <= 0:
            return PromptMemory()
        try:
            recent = await self.store.recent(
                tenant_id=tenant_id, scope_key=scope_key, limit=self._recent
            )
            matching = await self.store.search(
                tenant_id=tenant_id, scope_key=scope_key, query=query, limit=self._relevant
            )
        except MemoryUnavailable as exc:
            log.warning(
                "memory left out of the prompt: %s", exc.message, extra={"tenant": tenant_id}
            )
            self._health.memory_unreadable(tenant_id, scope_key, exc.message)
            return PromptMemory()
        self._health.memory_readable(tenant_id, scope_key)
        # The newest standing entries first, so a full budget leaves out the oldest; shown in
        # document order. Within budget only: the choice must not depend on the message.
        standing, used = self._within(reversed(recent), self._budget_tokens // 2)
        standing_ids = {entry.id for entry in standing}
        relevant, _ = self._within(
            (entry for entry in matching if entry.id not in standing_ids),
            self._budget_tokens - used,
        )
        return PromptMemory(
            standing=[_line(entry) for entry in reversed(standing)],
            relevant=[_line(entry) for entry in relevant],
        )

    def _within(self, entries: Iterable[MemoryEntry], budget: int) -> tuple[list[MemoryEntry], int]:
        chosen, used = [], 0
        for entry in entries:
            cost = self._counter.count(_line(entry)) + 1
            if used + cost > budget:
                continue  # a smaller line after it may still fit
            chosen.append(entry)
            used += cost
        return chosen, used


def _line(entry: MemoryEntry) -> str:
    return format_line(entry.date, entry.source_kind, entry.current_content)
