"""What memory can bring back into a prompt: a current fact of MEMORY.md, or a message one of
the scope's sessions said (an archived turn), each with the date it was said and where."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from functools import cached_property

from backend.domain.messages import Role
from backend.memory.corrections import SENTENCE
from backend.memory.entries import MemoryDocument, MemoryEntry, format_line
from backend.memory.terms import search_terms
from backend.storage.archive import SaidMessage
from backend.storage.memory_vectors import message_item

TURN_CHARS = 600  # an archived message longer than this is shown as its part that matched


@dataclass(frozen=True)
class Recollection:
    """One thing memory can bring back. `key` names it in the scope's indexes: a message's id,
    or a negative number for a fact. `vector_item` names its stored vector."""

    key: int
    text: str
    said_on: date
    source: str  # a fact's source kind (`auto-overflow/web`); where a message was said
    vector_item: str
    session_id: str | None = None
    role: Role | None = None  # a message's speaker; None for a fact
    message_id: int | None = None

    @property
    def is_turn(self) -> bool:
        return self.message_id is not None

    @property
    def is_question(self) -> bool:
        """A user message that only asks: it holds what its asker did not know."""
        text = self.text.strip()
        return (
            self.role == "user" and text.endswith(("?", "？")) and len(SENTENCE.findall(text)) == 1
        )

    @cached_property
    def words(self) -> frozenset[str]:
        """Its search terms (`terms.search_terms`), all of them."""
        return frozenset(search_terms(self.text, limit=None))

    @cached_property
    def plain_line(self) -> str:
        """The prompt line: `date|source|fact`, or `date|where, who|what was said`."""
        return self.line()

    @property
    def is_cut(self) -> bool:
        """Whether its line shows only part of it (a long message)."""
        return len(self.text) > TURN_CHARS

    def line(self, terms: tuple[str, ...] = ()) -> str:
        """The prompt line, a long message cut to the part around the first of `terms` it
        holds."""
        if self.role is None:
            return format_line(self.said_on, self.source, self.text)
        return format_line(self.said_on, f"{self.source}, {self.role}", excerpt(self.text, terms))


def fact_item(scope_text: str) -> str:
    return "f:" + hashlib.sha256(scope_text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def facts_of(document: MemoryDocument) -> Iterator[tuple[tuple[str, int], MemoryEntry, str]]:
    """((entry id, fact number), entry, fact) for every current fact of the document."""
    for entry in document.current_entries:
        for number, fact in enumerate(entry.facts, 1):
            if number not in entry.hidden_facts and fact.strip():
                yield (entry.id, number), entry, fact.strip()


def fact_recollection(key: int, entry: MemoryEntry, fact: str) -> Recollection:
    provenance = entry.provenance
    return Recollection(
        key=key,
        text=fact,
        said_on=entry.date,
        source=entry.source_kind,
        vector_item=fact_item(fact),
        session_id=provenance.session_id if provenance else None,
    )


def fact_recollection_of(fact: str) -> Recollection:
    """A fact as a bare item, to give it its vector before any index holds it."""
    return Recollection(key=0, text=fact, said_on=date.min, source="", vector_item=fact_item(fact))


def turn_recollection(message: SaidMessage) -> Recollection:
    return Recollection(
        key=message.id,
        text=message.content,
        said_on=message.created_at.date(),
        source=message.origin,
        vector_item=message_item(message.id),
        session_id=message.session_id,
        role=message.role,
        message_id=message.id,
    )


def excerpt(text: str, terms: tuple[str, ...]) -> str:
    """`text`, or when longer than TURN_CHARS the stretch of that length around the first of
    `terms` it holds (its start when it holds none), marked as cut."""
    if len(text) <= TURN_CHARS:
        return text
    folded = text.casefold()
    hits = [at for at in (folded.find(term) for term in terms) if at >= 0]
    start = max(0, min(hits) - TURN_CHARS // 3) if hits else 0
    start = min(start, len(text) - TURN_CHARS)
    cut = text[start : start + TURN_CHARS]
    return ("…" if start else "") + cut + ("…" if start + TURN_CHARS < len(text) else "")
