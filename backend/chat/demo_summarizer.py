"""The offline demo's summarizer: distills evicted turns without any LLM, deterministically.

It keeps what the user said about themselves (sentences with "my", "I am", "call me", "我叫"…),
anything they asked to be remembered, and the identifiers the fidelity gate looks for (names,
numbers, emails), so that with no key a newcomer still watches the rolling window work: a
memory line with its provenance, the session summary filling in, earlier messages archived.
A sentence saying that something of theirs changed ("my phone number is now …") replaces the
current facts about it, as a model is asked to.
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.chat.leftovers import ABOUT_THEMSELVES
from backend.chat.prompts import PromptRenderer
from backend.chat.summarizer import (
    REPLACEABLE_FACTS,
    Summarizer,
    SummaryModel,
    SummaryOutput,
    SummaryPrompt,
)
from backend.domain.messages import Usage
from backend.memory.corrections import (
    SENTENCE,
    changed_things,
    mentions_changed,
    overridden_sentences,
)
from backend.memory.entries import MAX_SUPERSEDED
from backend.memory.relevance import current_facts
from backend.providers.base import ChatProvider
from backend.providers.canned_text import quote

DEMO_SUMMARY_MODEL = "tally-demo"
SUMMARY_LINES = 12
TOPIC_CHARS = 70


class DemoSummarizer(Summarizer):
    """A `Summarizer` whose one attempt is a rule, not a model call."""

    def __init__(self, provider: ChatProvider, prompts: PromptRenderer) -> None:
        super().__init__([SummaryModel(provider, DEMO_SUMMARY_MODEL)], prompts)

    async def distill(self, model: SummaryModel, asked: SummaryPrompt) -> SummaryOutput:
        messages, memory_from_id = asked.messages, asked.memory_from_id
        said = [m.content for m in messages if m.role == "user"]
        new = [m.content for m in messages if m.role == "user" and m.id >= memory_from_id]
        facts = _facts(new, asked.keep)
        replaced = [  # the current facts about what the user said changed
            fact.ref
            for fact in current_facts(
                asked.replaceable, limit=REPLACEABLE_FACTS, queries=changed_things(new)
            )
            if mentions_changed(new, fact.text)
        ]
        words = sum(len(m.content.split()) for m in messages)
        usage = Usage(words, sum(len(f.split()) for f in facts))
        supersedes = tuple(replaced[:MAX_SUPERSEDED])
        summary = _summary(asked.previous_summary, said)
        return SummaryOutput(tuple(facts), summary, usage, supersedes)


def _facts(user_texts: Sequence[str], keep: Sequence[str]) -> list[str]:
    """Their sentences about themselves, the latest only of what they corrected."""
    facts: dict[str, None] = {}
    overridden = overridden_sentences(user_texts)
    for text in user_texts:
        for sentence in SENTENCE.findall(text):
            sentence = " ".join(sentence.split())
            if ABOUT_THEMSELVES.search(sentence) and sentence not in overridden:
                facts.setdefault(f"The user said: “{sentence}”", None)
    covered = " ".join([*facts, *overridden]).casefold()  # a taken-back value stays out
    for identifier in keep:  # what the fidelity gate would ask for, if no sentence held it
        if identifier.casefold() not in covered:
            facts.setdefault(f"The user mentioned {identifier}", None)
    return list(facts)


def _summary(previous: str, user_texts: Sequence[str]) -> str:
    lines = [line for line in previous.splitlines() if line.strip()]
    lines += [
        f"- The user said: “{quote(text, TOPIC_CHARS)}”" for text in user_texts if text.strip()
    ]
    return "\n".join(lines[-SUMMARY_LINES:])
