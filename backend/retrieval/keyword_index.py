"""BM25 over one memory scope's items, in SQLite's FTS5 (a private in-memory database).

FTS5 is the kept engine here whatever the deployment's own database is: the same index and
the same ranking on SQLite and PostgreSQL (whose full-text ranking has no term rarity), with
statistics of this scope alone, so no other tenant's words can move a rank. Texts go in as
`terms.indexed_text` makes them (Chinese as two-character pieces); FTS5's `porter` tokenizer
folds case and English endings on both sides (`works` meets `working`).

A query's cost grows with the items its terms appear in, so a query asks for its rarest terms
first and leaves out those in half of the items or more (FTS5's BM25 gives them no weight: only
their matches would cost), those weighing under a tenth of the rarest (ranking an item costs
about a microsecond, and such a term moves the order no more than a tie-break) and, past a few
thousand hits, the more common rest: a query stays within milliseconds on ten thousand items.
Items added wait for the next search or removal and go in together, in one transaction: FTS5
writes a segment per transaction, so many turns said between two searches cost one. Calls run
in the caller's thread; one lock keeps the connection to one thread at a time.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Sequence

from backend.memory.terms import indexed_text, search_terms

_SCHEMA = "CREATE VIRTUAL TABLE items USING fts5(body, tokenize = 'porter unicode61')"
# The hits as one row of two lists: sqlite3 lets go of the GIL for every row it steps to, and
# under load each of those is a thread switch (the database's threads wait for it); one row, one
# switch. Comma-separated, the lists split faster than JSON parses (a score's text is the same,
# SQLite's 15 significant digits).
_SEARCH = (
    "SELECT group_concat(key), group_concat(score) FROM (SELECT rowid AS key, "
    "-bm25(items) AS score FROM items WHERE items MATCH ? ORDER BY bm25(items) LIMIT ?)"
)
# FTS5 merges its segments as it writes, in proportion to what is written: a turn's two rows
# leave each term's hits spread over many small segments, and every search reads them all.
# Some merging of up to this many pages after each write keeps searches a sixth cheaper
# (measured on scenario d's 2,600 messages; a search's hits are the same). Not a negative count
# (merging across levels): on SQLite 3.40.1 that left the index malformed within 3,000 rows.
_MERGE = "INSERT INTO items(items, rank) VALUES('merge', 16)"
MAX_HITS = 4000  # items a query's terms may appear in, together, before rarer ones suffice
FEW_ITEMS = 20  # in an index this small every term is asked for: none costs anything
WEIGHT_SHARE = 0.1  # a term weighing less than this share of the rarest term asked for only
# breaks ties among the items that term finds, and ranking each item holding it costs


class KeywordIndex:
    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(_SCHEMA)
        self._lock = threading.Lock()
        self._holding: Counter[str] = Counter()  # term -> items holding it
        self._count = 0
        self._waiting: list[tuple[int, str]] = []  # (key, indexed text) added, not yet written

    def add(self, items: Iterable[tuple[int, str]]) -> None:
        """Index each (key, text); a key must not be in the index already."""
        items = list(items)
        rows = [(key, indexed_text(text)) for key, text in items]
        with self._lock:
            self._waiting += rows
        for _, text in items:
            self._holding.update(set(search_terms(text, limit=None)))
        self._count += len(items)

    def remove(self, items: Iterable[tuple[int, str]]) -> None:
        """Remove each (key, text), as it was added."""
        items = list(items)
        with self._lock:
            self._write_waiting()
            self._in_one_transaction("DELETE FROM items WHERE rowid = ?", [(k,) for k, _ in items])
        for _, text in items:
            self._holding.subtract(set(search_terms(text, limit=None)))
        self._count -= len(items)

    def search(
        self, terms: Sequence[str], limit: int, *, max_hits: int = MAX_HITS
    ) -> list[tuple[int, float]]:
        """(key, score) of the items holding any of `terms`, best first: BM25, higher better;
        the rarest terms alone once the items holding them pass `max_hits`."""
        terms = self._telling(terms, max_hits)
        if not terms or limit <= 0:
            return []
        query = " OR ".join(f'"{term}"' for term in terms)  # terms are \\w runs: no quotes
        with self._lock:
            self._write_waiting()
            keys, scores = self._db.execute(_SEARCH, (query, limit)).fetchone()
        if keys is None:  # no item holds any of the terms
            return []
        return list(zip(map(int, keys.split(",")), map(float, scores.split(",")), strict=True))

    def holding(self, term: str) -> int:
        """How many items hold `term`."""
        return self._holding[term]

    def _telling(self, terms: Sequence[str], max_hits: int) -> list[str]:
        """The terms worth asking for, rarest first: none held by half the items or more (of an
        index past FEW_ITEMS; their weight is zero or less), none weighing less than
        WEIGHT_SHARE of the rarest one found in the index, and no more common ones once
        `max_hits` items are reached."""
        chosen: list[str] = []
        hits, heaviest = 0, 0.0
        for term in sorted(terms, key=lambda term: self._holding[term]):
            holding = self._holding[term]
            is_common = holding * 2 >= self._count >= FEW_ITEMS
            weight = self._weight(holding)
            is_light = weight < WEIGHT_SHARE * heaviest and self._count >= FEW_ITEMS
            if is_common or (chosen and (hits + holding > max_hits or is_light)):
                break
            chosen.append(term)
            hits += holding
            heaviest = heaviest or (weight if holding else 0.0)
        return chosen

    def _weight(self, holding: int) -> float:
        """A term's BM25 weight (its inverse document frequency), as FTS5 computes it."""
        return math.log((self._count - holding + 0.5) / (holding + 0.5))

    def _write_waiting(self) -> None:
        if self._waiting:
            rows, self._waiting = self._waiting, []
            self._in_one_transaction("INSERT INTO items(rowid, body) VALUES (?, ?)", rows, _MERGE)

    def _in_one_transaction(
        self, statement: str, rows: Sequence[tuple[object, ...]], then: str | None = None
    ) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany(statement, rows)
            if then is not None:
                self._db.execute(then)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
