"""Everything one memory scope can bring back, indexed by words and by meaning, in this
process: its current facts (kept in step with its MEMORY.md) and the messages its sessions
said (appended as they come).

How a query is answered from it is `ranking.py`.

A message holding a value that was corrected later is *shadowed*: it stays stored but is
never brought back, so an old phone number cannot return through the archive. A message is
shadowed when it lies in the range a replaced fact was distilled from and holds most of the
words that set the old fact apart from the one replacing it, or when a later message of the
scope corrects in so many words what it said ("my phone number is now …", `corrections.py`),
as happens within one range, where the summarizer writes down only the latest value.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from backend.memory.corrections import changed_things
from backend.memory.entries import MemoryDocument, MemoryEntry, Provenance
from backend.memory.terms import search_terms
from backend.retrieval.embedders import Vectors
from backend.retrieval.keyword_index import KeywordIndex
from backend.retrieval.recollections import Recollection, fact_recollection, facts_of
from backend.retrieval.vector_index import VectorIndex


class Counter(Protocol):
    """Counts tokens for one model (chat/tokens.py's TokenCounter)."""

    model: str

    def count(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class Shadow:
    """Messages of `provenance`'s range that hold at least `needed` of `words` are shadowed."""

    provenance: Provenance
    words: frozenset[str]
    needed: int

    def covers(self, item: Recollection) -> bool:
        p = self.provenance
        if item.session_id != p.session_id or item.message_id is None:
            return False
        if not p.first_message_id <= item.message_id <= p.last_message_id:
            return False
        return len(self.words & item.words) >= self.needed


class ScopeIndex:
    def __init__(self) -> None:
        self.keywords = KeywordIndex()
        self.vectors = VectorIndex()
        self.items: dict[int, Recollection] = {}
        self.said_after = 0  # the newest message id indexed
        # What is still to be read from the database (all of it, for a new index): the id
        # after which; None when every message said is indexed.
        self.unread_after: int | None = 0
        # Refreshes asked for, and how many of them the latest read of the messages began
        # after: a read that began after a refresh was asked for found everything said before.
        self._asked = 0
        self._read_after = 0
        self.refreshing = asyncio.Lock()  # one refresh at a time; searches need none
        self._facts: dict[tuple[str, int], int] = {}  # (entry id, fact number) -> key
        self._fingerprint: tuple[int, str, str] | None = None
        self._next_fact_key = -1
        self._shadows: tuple[Shadow, ...] = ()
        self._shadowed: set[int] = set()  # by the facts that replaced theirs
        self._corrected: set[int] = set()  # by a later message saying it changed
        # Bare questions: they hold what their asker did not know (the answer may count).
        self._questions: set[int] = set()
        self._unvectored: dict[int, None] = {}  # items still without a vector, oldest first
        self._costs: dict[int, dict[str, int]] = {}  # key -> model -> tokens of its line
        self._standing: list[Recollection] = []  # the facts, oldest first

    def close(self) -> None:
        self.keywords.close()

    def read_from(self, after: int | None) -> None:
        """Note that messages after id `after` must be read (None: none must)."""
        if after is None or self.unread_after is None:
            self.unread_after = after
        else:
            self.unread_after = min(self.unread_after, after)

    def ask(self) -> int:
        """Note a refresh asked for now; its number."""
        self._asked += 1
        return self._asked

    def reading(self) -> None:
        """Note a read of the messages beginning now: it covers every refresh asked so far."""
        self._read_after = self._asked

    def is_read_since(self, asked: int) -> bool:
        """Whether a read of the messages began after refresh `asked` was asked for (then
        turns waiting on one another under load share one read)."""
        return self._read_after >= asked

    @property
    def fact_count(self) -> int:
        return len(self._facts)

    def facts_changed(self, document: MemoryDocument) -> bool:
        return _fingerprint(document) != self._fingerprint

    def sync_facts(self, document: MemoryDocument) -> tuple[list[Recollection], list[Recollection]]:
        """Bring the facts in step with `document`: (facts added, facts removed)."""
        current = {identity: (entry, fact) for identity, entry, fact in facts_of(document)}
        gone = [self.items.pop(self._facts.pop(key)) for key in self._facts.keys() - current.keys()]
        added = []
        for identity, (entry, fact) in current.items():
            if identity in self._facts:
                continue
            recollection = fact_recollection(self._next_fact_key, entry, fact)
            self._next_fact_key -= 1
            self._facts[identity] = recollection.key
            self.items[recollection.key] = recollection
            added.append(recollection)
        self._forget(gone)
        self.keywords.add((item.key, item.text) for item in added)
        self._standing = [self.items[self._facts[identity]] for identity in current]
        self._unvectored.update(dict.fromkeys(item.key for item in added))
        self._fingerprint = _fingerprint(document)
        self._set_shadows(shadows_of(document))
        return added, gone

    def add_turns(self, turns: Sequence[Recollection]) -> None:
        """Index messages, in id order, after every message indexed before."""
        fresh = [turn for turn in turns if turn.key not in self.items]
        for turn in fresh:
            self.items[turn.key] = turn
            if any(shadow.covers(turn) for shadow in self._shadows):
                self._shadowed.add(turn.key)
            if turn.role == "user":
                self._shadow_corrected(turn)
                if turn.is_question:
                    self._questions.add(turn.key)
        self.keywords.add((turn.key, turn.text) for turn in fresh)
        self._unvectored.update(dict.fromkeys(turn.key for turn in fresh))
        if turns:
            self.said_after = max(self.said_after, max(turn.key for turn in turns))

    def drop(self, keys: Iterable[int]) -> None:
        """Forget messages that are no longer stored."""
        self._forget([item for key in keys if (item := self.items.pop(key, None)) is not None])

    def add_vectors(self, keys: list[int], vectors: Vectors) -> None:
        self.vectors.add(keys, vectors)
        for key in keys:
            self._unvectored.pop(key, None)

    def unvectored(self, limit: int) -> list[Recollection]:
        """Up to `limit` items still without a vector, oldest first."""
        keys = list(itertools.islice(self._unvectored, limit))
        return [self.items[key] for key in keys]

    def _forget(self, items: list[Recollection]) -> None:
        self.keywords.remove((item.key, item.text) for item in items)
        keys = [item.key for item in items]
        self.vectors.remove(keys)
        for key in keys:
            self._unvectored.pop(key, None)
            self._shadowed.discard(key)
            self._corrected.discard(key)
            self._questions.discard(key)
            self._costs.pop(key, None)

    @property
    def hidden(self) -> int:
        """How many items a search may have to pass over (shadowed or corrected)."""
        return len(self._shadowed) + len(self._corrected)

    def cost(self, item: Recollection, counter: Counter) -> int:
        """Tokens of the item's plain line (and its newline) for `counter`'s model, counted once."""
        costs = self._costs.setdefault(item.key, {})
        cost = costs.get(counter.model)
        if cost is None:
            cost = costs[counter.model] = counter.count(item.plain_line) + 1
        return cost

    def standing_facts(self) -> list[Recollection]:
        """The current facts, oldest first (document order)."""
        return self._standing

    def visible(
        self, hits: list[tuple[int, float]], excluded: Container[int]
    ) -> list[tuple[int, float]]:
        """`hits` less what is gone, shadowed, corrected, a bare question, or `excluded`, in
        order. Sets only: it runs for every hit of every search."""
        items, shadowed, corrected, questions = (
            self.items,
            self._shadowed,
            self._corrected,
            self._questions,
        )
        return [
            hit
            for hit in hits
            if (key := hit[0]) in items
            and key not in shadowed
            and key not in corrected
            and key not in questions
            and key not in excluded
        ]

    def _shadow_corrected(self, correction: Recollection) -> None:
        """Shadow the earlier user messages about what `correction` says changed."""
        for thing in changed_things([correction.text]):
            self._corrected.update(
                key
                for key, item in self.items.items()
                if item.role == "user" and key < correction.key and thing in item.text.casefold()
            )

    def _set_shadows(self, shadows: tuple[Shadow, ...]) -> None:
        if shadows == self._shadows:
            return
        self._shadows = shadows
        self._shadowed = {
            key
            for key, item in self.items.items()
            if item.is_turn and any(shadow.covers(item) for shadow in shadows)
        }


def shadows_of(document: MemoryDocument) -> tuple[Shadow, ...]:
    """A Shadow for every fact a later entry replaced, where the old fact has provenance and
    words the new entry does not have."""
    by_id = {entry.id: entry for entry in document.entries}
    shadows = []
    for entry in document.entries:
        new_words = set(search_terms(entry.content, limit=None))
        for ref in entry.supersedes:
            entry_id, _, number = ref.partition(".")
            old = by_id.get(entry_id)
            if old is None or old.provenance is None:
                continue
            for fact in _facts_named(old, number):
                words = frozenset(search_terms(fact, limit=None)) - new_words
                if words:
                    shadows.append(Shadow(old.provenance, words, math.ceil(len(words) / 2)))
    return tuple(shadows)


def _facts_named(entry: MemoryEntry, number: str) -> list[str]:
    facts = entry.facts
    if not number:
        return facts
    index = int(number) - 1
    return [facts[index]] if 0 <= index < len(facts) else []


def _fingerprint(document: MemoryDocument) -> tuple[int, str, str]:
    """Changes whenever the document does, as stores change them: an entry's id changes with
    its text (a line's hash in a file, a new row in the database), lines are appended or
    deleted (a fact is replaced by appending its successor), and a replacement of the whole
    document gives new ids from its first line."""
    entries = document.entries
    if not entries:
        return (len(document.lines), "", "")
    return (len(document.lines), entries[0].id, entries[-1].id)
