"""The offline demo's summarizer: distills evicted turns without any LLM, deterministically.

It keeps what the user said about themselves (sentences with "my", "I am", "call me", "我叫"…),
anything they asked to be remembered, and the identifiers the fidelity gate looks for (names,
numbers, emails), so that with no key a newcomer still watches the rolling window work: a
memory line with its provenance, the session summary filling in, earlier messages archived.
A sentence saying that something of theirs changed ("my phone number is now …") replaces the
current lines about it, as a model is asked to, and keeps what else those lines said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.chat.prompts import PromptRenderer
from backend.chat.summarizer import Summarizer, SummaryModel, SummaryOutput
from backend.domain.messages import StoredMessage, Usage
from backend.memory.entries import MemoryEntry
from backend.providers.base import ChatProvider
from backend.providers.canned_text import quote

DEMO_SUMMARY_MODEL = "tally-demo"
SUMMARY_LINES = 12
TOPIC_CHARS = 70
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")
# "my phone number is now …", "my address changed to …": what changed is the words after "my".
_CHANGED = re.compile(
    r"\bmy ((?:\w+ ){0,3}?\w+) (?:is now|has changed to|changed to|is no longer)\b", re.I
)
FACT_SEPARATOR = "; "  # how a memory line joins its facts (SummaryOutput.memory_text)
_ABOUT_THEMSELVES = re.compile(
    r"\b(my|i am|i'm|i live|i work|i like|i love|i prefer|i have|call me|remember)\b"
    r"|我叫|我是|我住|我在|我喜欢|我的|记住",
    re.IGNORECASE,
)


class DemoSummarizer(Summarizer):
    """A `Summarizer` whose one attempt is a rule, not a model call."""

    def __init__(self, provider: ChatProvider, prompts: PromptRenderer) -> None:
        super().__init__([SummaryModel(provider, DEMO_SUMMARY_MODEL)], prompts)

    async def distill(
        self,
        model: SummaryModel,
        messages: Sequence[StoredMessage],
        memory_from_id: int,
        previous_summary: str,
        language: str,
        keep: list[str],
        replaceable: Sequence[MemoryEntry] = (),
        missing: Sequence[str] = (),
    ) -> SummaryOutput:
        said = [m.content for m in messages if m.role == "user"]
        new = [m.content for m in messages if m.role == "user" and m.id >= memory_from_id]
        facts = _facts(new, keep)
        replaced = _replaced(new, replaceable)
        for entry in replaced:  # what else the replaced lines said still holds
            facts += [f for f in entry.content.split(FACT_SEPARATOR) if not _changes(new, f)]
        words = sum(len(m.content.split()) for m in messages)
        usage = Usage(words, sum(len(f.split()) for f in facts))
        supersedes = tuple(entry.id for entry in replaced)
        return SummaryOutput(tuple(facts), _summary(previous_summary, said), usage, supersedes)


def _changed_things(user_texts: Sequence[str]) -> list[str]:
    """What the user said changed: `phone number` of "my phone number is now …"."""
    return [m[1].casefold() for text in user_texts for m in _CHANGED.finditer(text)]


def _changes(user_texts: Sequence[str], fact: str) -> bool:
    folded = fact.casefold()
    return any(f"my {thing}" in folded for thing in _changed_things(user_texts))


def _replaced(user_texts: Sequence[str], lines: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """The current lines about something the user said changed."""
    return [line for line in lines if _changes(user_texts, line.content)]


def _facts(user_texts: Sequence[str], keep: Sequence[str]) -> list[str]:
    facts: dict[str, None] = {}
    for text in user_texts:
        for sentence in _SENTENCE.findall(text):
            sentence = " ".join(sentence.split())
            if _ABOUT_THEMSELVES.search(sentence):
                facts.setdefault(f"The user said: “{sentence}”", None)
    covered = " ".join(facts).casefold()
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
