"""Which memory reaches the model, in two parts kept apart for the vendor's prompt cache:

- `standing`: facts that depend on the memory alone, for the system prompt, the same from turn
  to turn until memory is written: the newest facts within `standing_share` of the budget (all
  of them when they fit there, billed at the cached rate after the first turn: an operator who
  wants all of memory standing raises the budget and the share).
- `relevant` facts and `earlier` messages (archived turns of the scope's sessions): what the
  new message calls for, ranked by words and meaning (`backend/retrieval`), in the rest of the
  budget. They change every turn, so they travel after the conversation, with the message.

Lines are `date|source|content`, dated when their words were said; provenance is stripped: the
model needs the fact, not the ids.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from backend.chat.memory_health import MemoryHealth
from backend.chat.tokens import TokenCounter
from backend.memory.base import MemoryStore, MemoryUnavailable
from backend.memory.linked_scopes import PersonalMemory
from backend.memory.terms import search_terms
from backend.retrieval.embedders import Embedder, Vectors
from backend.retrieval.ranking import rank
from backend.retrieval.recall import Recall, Scope
from backend.retrieval.recollections import Recollection
from backend.retrieval.scope_index import ScopeIndex

log = logging.getLogger(__name__)

RANKED = 120  # candidates ranked per message: more than a budget of lines holds, so a line
# that does not fit leaves room for the next
NEAR_COPY = 0.7  # the share of shared words that makes a line a repeat of one chosen


@dataclass(frozen=True, slots=True)
class PromptMemory:
    """Prompt lines: `standing` for the system prompt; `relevant` facts and `earlier` messages
    for the turn's context."""

    standing: list[str] = field(default_factory=list)
    relevant: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Window:
    """The messages the request carries already: a session's, by id."""

    session_id: str
    ids: frozenset[int]


@dataclass(frozen=True, slots=True)
class Retrieval:
    """How one tenant's memory is found: the shared `recall`, its embedder (None: words
    alone), whether archived turns are candidates, and the standing part's share."""

    recall: Recall
    embedder: Embedder | None = None
    search_archive: bool = True
    standing_share: float = 0.25
    deletes_evicted: bool = False  # memory.delete_evicted: archived turns are deleted


class MemoryContext:
    def __init__(
        self,
        store: MemoryStore,
        counter: TokenCounter,
        *,
        budget_tokens: int,
        retrieval: Retrieval,
        scope_by_user: bool = False,
        health: MemoryHealth | None = None,
    ) -> None:
        self.store = store
        self._counter = counter
        self._budget_tokens = budget_tokens
        self._retrieval = retrieval
        self._scope_by_user = scope_by_user
        self._health = health or MemoryHealth()

    async def lines(
        self, *, tenant_id: str, scope_key: str, query: str, window: Window | None = None
    ) -> PromptMemory:
        """The standing, relevant and earlier lines for a message, within the budget.

        Memory that cannot be read leaves the prompt without it: the user still gets a reply.
        """
        if self._budget_tokens <= 0:
            return PromptMemory()
        recall, embedder = self._retrieval.recall, self._retrieval.embedder
        query_vector: asyncio.Future[Vectors | None]
        if embedder is None or embedder.is_local:  # made in this thread: a task costs a loop turn
            query_vector = asyncio.get_running_loop().create_future()
            query_vector.set_result(await recall.embed_query(query, embedder))
        else:  # a remote model answers while memory is read
            query_vector = asyncio.ensure_future(recall.embed_query(query, embedder))
        try:
            scope = await self._scope(tenant_id, scope_key)
            index = await self._index(scope)
        except MemoryUnavailable as exc:
            query_vector.cancel()
            log.warning(
                "memory left out of the prompt: %s", exc.message, extra={"tenant": tenant_id}
            )
            self._health.memory_unreadable(tenant_id, scope_key, exc.message)
            return PromptMemory()
        self._health.memory_readable(tenant_id, scope_key)
        standing, used = self._standing(index)
        excluded = {item.key for item in standing}  # a fact's key is negative, a message's its id
        if window is not None:
            excluded.update(window.ids)
        terms = search_terms(query)
        ranked = rank(index, terms, await query_vector, limit=RANKED, excluded=excluded)
        chosen = self._within(index, ranked, self._budget_tokens - used, tuple(terms))
        # A message deleted since it was indexed is left out: another session's (deleted with
        # it, from any process), or this session's archived ones when evicted ones are deleted.
        current = window.session_id if window is not None else None
        checked = [
            item
            for item, _ in chosen
            if item.is_turn and (self._retrieval.deletes_evicted or item.session_id != current)
        ]
        gone = await recall.gone(scope, index, checked)
        chosen = [(item, line) for item, line in chosen if item.key not in gone]
        return PromptMemory(
            standing=[item.line() for item in standing],
            relevant=[line for item, line in chosen if not item.is_turn],
            earlier=[line for item, line in chosen if item.is_turn],
        )

    async def _scope(self, tenant_id: str, scope_key: str) -> Scope:
        """The memory a turn reads and the sessions it searches, for an end user's key."""
        if not self._scope_by_user:
            return Scope(tenant_id, "", None)
        if not scope_key:
            return Scope(tenant_id, "", ())
        if isinstance(self.store, PersonalMemory):
            memory_key, user_keys = await self.store.members(
                tenant_id=tenant_id, user_key=scope_key
            )
            return Scope(tenant_id, memory_key, user_keys)
        return Scope(tenant_id, scope_key, (scope_key,))

    async def _index(self, scope: Scope) -> ScopeIndex:
        stored = self.store.store if isinstance(self.store, PersonalMemory) else self.store
        document = await stored.read(tenant_id=scope.tenant_id, scope_key=scope.memory_key)
        retrieval = self._retrieval
        return await retrieval.recall.refreshed(
            scope, document, retrieval.embedder, search_archive=retrieval.search_archive
        )

    def _standing(self, index: ScopeIndex) -> tuple[list[Recollection], int]:
        """The newest facts within the standing share of the budget (all of them when they fit
        there): chosen from memory alone, so the system prompt stays the same for any message."""
        newest: list[Recollection] = []
        used, share = 0, int(self._budget_tokens * self._retrieval.standing_share)
        for item in reversed(index.standing_facts()):
            cost = self._cost(index, item)
            if used + cost > share:
                break  # the newest first, and no older line past one that did not fit
            newest.append(item)
            used += cost
        return newest[::-1], used

    def _cost(self, index: ScopeIndex, item: Recollection) -> int:
        return index.cost(item, self._counter)

    def _within(
        self,
        index: ScopeIndex,
        ranked: Iterable[Recollection],
        budget: int,
        terms: tuple[str, ...],
    ) -> list[tuple[Recollection, str]]:
        chosen, used = [], 0
        said = _Said()
        for item in ranked:
            words = item.words
            if said.repeats(words):  # first: most candidates that are left are repeats
                continue  # a repeat says nothing new, and its tokens are billed every turn
            if item.is_cut:
                line = item.line(terms)
                cost = self._counter.count(line) + 1
            else:
                line, cost = item.plain_line, self._cost(index, item)
            if used + cost > budget:
                continue  # a smaller line after it may still fit
            chosen.append((item, line))
            said.add(words)
            used += cost
        return chosen


class _Said:
    """The lines chosen so far, to tell a repeat of one: most words of the longer of the two
    are the shorter's too (a question asked again, a message repeated with another number).

    Asked for every candidate against every line chosen, so written for speed: each word of a
    chosen line is a bit and a line the sum of its words' bits, so the words two lines share
    are the bits they share; a line said word for word is found at once, and two lines too
    different in length to share that much are never compared."""

    def __init__(self) -> None:
        self._lines: set[frozenset[str]] = set()
        self._bits: dict[str, int] = {}
        self._masks: list[tuple[int, int]] = []  # (a chosen line's bits, how many words)

    def add(self, words: frozenset[str]) -> None:
        bits, mask = self._bits, 0
        for word in words:
            mask |= bits.setdefault(word, 1 << len(bits))  # a new word takes the next bit
        self._lines.add(words)
        self._masks.append((mask, len(words)))

    def repeats(self, words: frozenset[str]) -> bool:
        if not words:
            return False
        if words in self._lines:
            return True
        size, mask = len(words), None
        for other_mask, other in self._masks:
            if size > other:
                needed = NEAR_COPY * size  # more than 0: `words` is not empty
                if other < needed:
                    continue
            else:
                needed = NEAR_COPY * other
                if size < needed:
                    continue
            if mask is None:  # distinct words have distinct bits: their sum is their union
                mask = sum(map(self._bits.get, words, itertools.repeat(0)))
            if (mask & other_mask).bit_count() >= needed:
                return True
        return False
