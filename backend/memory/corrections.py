"""Corrections a user makes in so many words ("my phone number is now …", "correction: my
email is …", "我的手机号改成了…", "更正：我的邮箱是…"): what changed, and which earlier
sentences of theirs it overrides. The demo summarizer replaces by these rules; the fidelity
gate uses them so that it never asks to keep an identifier the user took back. English and
Chinese phrasing; a model summarizer needs none of it."""

from __future__ import annotations

import re
from collections.abc import Sequence

_THING = r"(my (?:[\w'-]+ ){0,3}?[\w'-]+)"
_THING_ZH = r"(我的[\w]{1,8}?)"  # 我的 and what follows it, up to the verb
_CHANGED = (
    re.compile(
        rf"\b{_THING} (?:is now|is actually|(?:has )?changed(?: to)?|(?:has )?moved to"
        r"|is no longer)\b",
        re.I,
    ),
    re.compile(rf"\b(?:correction|update|these days|actually)\b[:,]?\s+{_THING} is\b", re.I),
    re.compile(rf"{_THING_ZH}(?:现在是|其实是|已经?改成了?|改成了?|改为|换成了?|变成了?|更新为)"),
    re.compile(rf"(?:更正|纠正|更新|其实|现在)[:：，,]?\s*{_THING_ZH}(?:是|为)"),
)
# A sentence ends at . ! ? followed by a space or the end: "a@example.org" is one word.
SENTENCE = re.compile(r"(?:[^.!?。！？\n]|[.!?](?=[^\s.!?]))+[.!?。！？]*")


def changed_things(texts: Sequence[str]) -> list[str]:
    """What the user said changed, as they named it: `my phone number` of "my phone number is
    now …", `我的手机号` of "我的手机号改成了…"."""
    return [
        match[1].casefold()
        for text in texts
        for pattern in _CHANGED
        for match in pattern.finditer(text)
    ]


def mentions_changed(texts: Sequence[str], fact: str) -> bool:
    """Whether `fact` is about something `texts` say changed."""
    folded = fact.casefold()
    return any(thing in folded for thing in changed_things(texts))


def overridden_sentences(texts: Sequence[str]) -> set[str]:
    """Sentences of `texts` (in order) about something a later sentence says changed."""
    sentences = [" ".join(s.split()) for text in texts for s in SENTENCE.findall(text)]
    overridden = set()
    later: list[str] = []  # what the sentences after the one at hand say changed
    for sentence in reversed(sentences):  # each sentence read once, not once for each before it
        folded = sentence.casefold()
        if any(thing in folded for thing in later):
            overridden.add(sentence)
        later += changed_things([sentence])
    return overridden


def without_overridden(texts: Sequence[str]) -> list[str]:
    """`texts` without the sentences a later one overrides (everything else as it was)."""
    # The longest first: a sentence holding another overridden one goes whole (in any other
    # order the shorter would cut it, and what is left of it would stay).
    overridden = sorted(
        overridden_sentences(texts), key=lambda sentence: (-len(sentence), sentence)
    )
    kept = []
    for text in texts:
        for sentence in overridden:
            text = text.replace(sentence, " ")
        kept.append(text)
    return kept
