"""Which memory entries, and which of their facts, mention what a text mentions: whole terms
(`terms.py`), each weighted by how rare it is among the entries searched, so that a name counts
for more than a word every line has. The prompt's own retrieval ranks facts and archived turns
by words and meaning together (`backend/retrieval`); this is the plain term match that the
memory API's search and the summarizer's list of replaceable facts use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backend.memory.entries import MemoryEntry
from backend.memory.terms import search_terms

PER_QUERY = 5  # facts taken for each message a summarizer's range holds


def rank_entries(entries: Sequence[MemoryEntry], query: str, limit: int) -> list[MemoryEntry]:
    """Entries holding any term of `query` as a whole term, best first: the rarer the terms
    they hold, the better; then newer date, then later in the document."""
    terms = search_terms(query, limit=None)  # a summarizer's range asks with all it said
    if not terms or limit <= 0:
        return []
    held = [frozenset(search_terms(entry.current_content, limit=None)) for entry in entries]
    weights = _rarity(terms, held)
    scored = []
    for position, (entry, entry_terms) in enumerate(zip(entries, held, strict=True)):
        score = sum(weights[term] for term in terms if term in entry_terms)
        if score:
            scored.append((score, entry.date, position, entry))
    scored.sort(key=lambda item: item[:3], reverse=True)
    return [entry for *_, entry in scored[:limit]]


def _rarity(terms: Sequence[str], held: Sequence[frozenset[str]]) -> dict[str, float]:
    """Each term's inverse document frequency among `held` (BM25's form: always positive)."""
    count = len(held)
    weights = {}
    for term in terms:
        having = sum(term in entry_terms for entry_terms in held)
        weights[term] = math.log(1 + (count - having + 0.5) / (having + 0.5)) if having else 0.0
    return weights


@dataclass(frozen=True)
class FactRef:
    """One current fact of an entry, and how a new entry names it to replace it: the entry's
    id when it is its only fact, else `id.n`."""

    ref: str
    text: str


def current_facts(
    entries: Iterable[MemoryEntry], *, limit: int, queries: Sequence[str] | None = None
) -> list[FactRef]:
    """The facts of `entries` no later entry replaced, at most `limit`: in order, or with
    `queries`, for each query in turn the PER_QUERY facts sharing its rarest terms (none that
    shares no term), so that every message of a range gets the facts about its own subject."""
    found: list[FactRef] = []
    for entry in entries:
        facts = entry.facts
        for number, text in enumerate(facts, 1):
            if number not in entry.hidden_facts:
                found.append(FactRef(entry.id if len(facts) == 1 else f"{entry.id}.{number}", text))
    if queries is None:
        return found[:limit]
    held = [frozenset(search_terms(fact.text, limit=None)) for fact in found]
    chosen: dict[str, FactRef] = {}
    for query in queries:
        # A message that changes a fact names its subject and a new value: the subject is
        # what the old fact shares, so numbers (a new phone number, a date) are left out.
        terms = [term for term in search_terms(query, limit=None) if not term.isdigit()]
        weights = _rarity(terms, held)
        scored = [
            (sum(weights[term] for term in terms if term in fact_terms), index)
            for index, fact_terms in enumerate(held)
        ]
        scored.sort(key=lambda item: -item[0])  # stable: equal scores keep their order
        for score, index in scored[:PER_QUERY]:
            if score and len(chosen) < limit:
                chosen.setdefault(found[index].ref, found[index])
    return list(chosen.values())
