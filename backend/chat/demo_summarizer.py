"""The offline demo's summarizer: distills evicted turns without any LLM, deterministically.

It keeps what the user said about themselves (sentences with "my", "I am", "call me", "我叫"…),
anything they asked to be remembered, and the identifiers the fidelity gate looks for (names,
numbers, emails), so that with no key a newcomer still watches the rolling window work: a
memory line with its provenance, the session summary filling in, earlier messages archived.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.chat.prompts import PromptRenderer
from backend.chat.summarizer import Summarizer, SummaryModel, SummaryOutput
from backend.domain.messages import StoredMessage, Usage
from backend.providers.base import ChatProvider
from backend.providers.canned_text import quote

DEMO_SUMMARY_MODEL = "tally-demo"
SUMMARY_LINES = 12
TOPIC_CHARS = 70
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")
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
        missing: Sequence[str] = (),
    ) -> SummaryOutput:
        said = [m.content for m in messages if m.role == "user"]
        new = [m.content for m in messages if m.role == "user" and m.id >= memory_from_id]
        facts = _facts(new, keep)
        words = sum(len(m.content.split()) for m in messages)
        usage = Usage(words, sum(len(f.split()) for f in facts))
        return SummaryOutput(tuple(facts), _summary(previous_summary, said), usage)


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
