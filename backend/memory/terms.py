"""The words a search looks for, shared by every ranker: whole words, case-folded, without the
words every sentence has, and Chinese or Japanese cut into overlapping two-character pieces
(they put no spaces between words, and most of their words are two characters long).

`search_terms` is what a query asks for; `indexed_text` is a text as a keyword index stores
it, split the same way, so that a term of one always meets the same term of the other.
"""

from __future__ import annotations

import re

_WORDS = re.compile(r"\w+")
CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff"
_CJK_RUNS = re.compile(f"([{CJK}]+)")
MAX_TERMS = 24  # a long message asks for its first distinct terms; the rest add little

# Words too common to tell one memory from another: weighting would make them cheap, but
# each still costs a lookup, and a query made only of them should find nothing.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    im ive id ill youre youve dont didnt doesnt isnt wasnt cant wont also yes yeah ok okay oh
    hi hey hello thanks thank please really much many get got know like one well still let us
    s t d ll m re ve
    """.split()
)
# Two-character pieces that carry no subject in Chinese: pronouns, particles, question words.
CJK_STOP_PIECES = frozenset(
    """
    我们 你们 他们 她们 它们 什么 怎么 哪里 哪个 这个 那个 一个 这样 那样 没有 就是 不是 可以
    因为 所以 但是 还是 已经 自己 时候 现在 知道 觉得 一下 一些 的时 的是 了吗 是什 么时
    """.split()
)


def search_terms(text: str, *, limit: int | None = MAX_TERMS) -> list[str]:
    """The distinct terms of `text` worth looking for, in order, at most `limit`: case-folded
    words less stop words, and each run of CJK characters as its two-character pieces (a lone
    character stays one term)."""
    terms: dict[str, None] = {}
    for word in _WORDS.findall(text.casefold()):
        for term in (word,) if word.isascii() else _mixed_word_terms(word):
            if term not in STOP_WORDS and term not in CJK_STOP_PIECES:
                terms[term] = None
                if len(terms) == limit:
                    return list(terms)
    return list(terms)


def _mixed_word_terms(word: str) -> list[str]:
    """The terms of a word that may hold CJK (an ASCII word is its own term, found without a
    regex: most words, and this runs for every message indexed and every query)."""
    return [
        term
        for part in _CJK_RUNS.split(word)
        if part
        for term in (_cjk_pieces(part) if _CJK_RUNS.fullmatch(part) else (part,))
    ]


def indexed_text(text: str) -> str:
    """`text` as a keyword index stores it: every CJK run replaced by its two-character pieces,
    separated by spaces; other text as it is (the index splits and folds it)."""
    return _CJK_RUNS.sub(lambda run: " " + " ".join(_cjk_pieces(run[0])) + " ", text)


def _cjk_pieces(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]
