"""Which memory entries, and which of their facts, matter to a text: search terms (CJK runs as
bigrams), entries ranked by the terms they match, and the current facts sharing most terms."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backend.memory.entries import MemoryEntry

_WORDS = re.compile(r"\w+")
_CJK_RUNS = re.compile(
    r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]+)"
)


def search_terms(query: str) -> list[str]:
    """Case-folded words of `query`; runs of CJK characters become overlapping bigrams, since
    Chinese and Japanese put no spaces between words."""
    terms: list[str] = []
    for word in _WORDS.findall(query.casefold()):
        for part in _CJK_RUNS.split(word):
            if _CJK_RUNS.fullmatch(part) and len(part) > 1:
                terms.extend(part[i : i + 2] for i in range(len(part) - 1))
            elif part:
                terms.append(part)
    return list(dict.fromkeys(terms))


def rank_entries(entries: Sequence[MemoryEntry], query: str, limit: int) -> list[MemoryEntry]:
    """Entries whose content contains any term of `query` (case-insensitive, substring),
    best first: more matching terms, then newer date, then later in the document."""
    terms = search_terms(query)
    scored = []
    for position, entry in enumerate(entries):
        content = entry.searchable
        matches = sum(1 for term in terms if term in content)
        if matches:
            scored.append((matches, entry.date, position, entry))
    scored.sort(key=lambda item: item[:3], reverse=True)
    return [entry for *_, entry in scored[:limit]]


@dataclass(frozen=True)
class FactRef:
    """One current fact of an entry, and how a new entry names it to replace it: the entry's
    id when it is its only fact, else `id.n`."""

    ref: str
    text: str


def current_facts(
    entries: Iterable[MemoryEntry], *, limit: int, query: str | None = None
) -> list[FactRef]:
    """The facts of `entries` no later entry replaced, at most `limit`: in order, or with a
    `query` those sharing most of its terms first (and none that shares no term)."""
    found: list[FactRef] = []
    for entry in entries:
        facts = entry.facts
        for number, text in enumerate(facts, 1):
            if number not in entry.hidden_facts:
                found.append(FactRef(entry.id if len(facts) == 1 else f"{entry.id}.{number}", text))
    if query is None:
        return found[:limit]
    terms = search_terms(query)
    scored = [(sum(t in fact.text.casefold() for t in terms), fact) for fact in found]
    scored.sort(key=lambda item: -item[0])  # stable: equal scores keep their order
    return [fact for score, fact in scored if score][:limit]
