"""What a memory scope brings back for a query: its items ranked by words (BM25) and by
meaning (cosine), the two orders fused by reciprocal rank, then one step further.

Fusion: an item high in either list ranks high, one high in both ranks highest, and the two
lists' scores need no common scale. Only an item that bears on the query takes part: words
that score near the best (at least WORDS_SHARE of the top BM25), or a meaning that is close
(a cosine of at least MEANING_FLOOR) and near the closest (within MEANING_MARGIN of it). Every
query has a tail of text that merely sounds alike; it must not fill the prompt.

One step further: a question often names a thing by what was said of it elsewhere ("what does
the colleague who organises the run ..." — the run's cause was said in another message, with
the run's name but not the colleague's). The rarest words of the best few items are asked for
in turn (pseudo-relevance feedback), as long as the items holding them fit in the ranking (a
word more common than that names nothing in particular), and what they find joins the ranking
below what the query found itself.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from backend.memory.terms import search_terms
from backend.retrieval.embedders import Vectors
from backend.retrieval.recollections import Recollection
from backend.retrieval.scope_index import ScopeIndex

RRF_K = 60  # the usual constant of reciprocal rank fusion: damps the weight of the very top
MEANING_FLOOR = 0.25  # a cosine below this is no evidence of relevance (unrelated text ~0)
MEANING_MARGIN = 0.25  # ... nor one this far below the closest item's
WORDS_SHARE = 0.15  # a BM25 score below this share of the best one's is the list's tail
FOLLOWED = 3  # the best items whose words are asked for in turn
FOLLOW_TERMS = 3  # the rarest words taken from each
FOLLOW_WEIGHT = 0.5  # what a follow-up hit counts, against a hit of the query itself


def rank(
    index: ScopeIndex,
    terms: Sequence[str],
    query: Vectors | None,
    *,
    limit: int,
    excluded: Container[int],
) -> list[Recollection]:
    """Up to `limit` items that bear on the query, best first; never one whose key is
    `excluded`, nor a shadowed or corrected one."""
    wanted = limit + index.hidden + 32  # room for what is filtered out
    by_words = index.visible(index.keywords.search(terms, wanted), excluded)
    by_meaning = []
    if query is not None:
        found = index.vectors.search(query, wanted, floor=MEANING_FLOOR)
        by_meaning = index.visible(found, excluded)
    scores: dict[int, float] = {}
    _fuse(scores, by_words, by_words[0][1] * WORDS_SHARE if by_words else 0.0)
    _fuse(scores, by_meaning, by_meaning[0][1] - MEANING_MARGIN if by_meaning else 0.0)
    best = _order(scores)
    seeds = best[:FOLLOWED]
    followed = _follow_up_terms(index, [index.items[key] for key in seeds], terms)
    if followed:  # words rare enough that every item holding them can take part
        found = index.keywords.search(followed, wanted, max_hits=wanted)
        hits = index.visible([hit for hit in found if hit[0] not in seeds], excluded)
        _fuse(scores, hits, hits[0][1] * WORDS_SHARE if hits else 0.0, weight=FOLLOW_WEIGHT)
        best = _order(scores)
    return [index.items[key] for key in best[:limit]]


def _fuse(
    scores: dict[int, float], hits: list[tuple[int, float]], bar: float, weight: float = 1.0
) -> None:
    earlier = scores.get
    for place, (key, score) in enumerate(hits):
        if score >= bar:
            scores[key] = earlier(key, 0.0) + weight / (RRF_K + place)


def _order(scores: dict[int, float]) -> list[int]:
    """Best first; ties, the newer first (sorts are stable, and keyed by built-ins: fast)."""
    newest_first = sorted(scores, key=abs, reverse=True)
    newest_first.sort(key=scores.__getitem__, reverse=True)
    return newest_first


def _follow_up_terms(
    index: ScopeIndex, best: Sequence[Recollection], asked: Sequence[str]
) -> list[str]:
    """The rarest words of each of `best` that the query did not ask for itself."""
    followed: dict[str, None] = {}
    for item in best:
        fresh = [term for term in search_terms(item.text, limit=None) if term not in asked]
        fresh.sort(key=index.keywords.holding)
        followed.update(dict.fromkeys(fresh[:FOLLOW_TERMS]))
    return list(followed)
