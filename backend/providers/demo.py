"""The offline demo's model: answers without any LLM, from what its prompt carries.

It quotes the user and, like a real model reading its system prompt, answers from the memory
lines (`date|source|content`) the prompt holds, so a newcomer sees what left the window come
back. Its text is deterministic: the same request always gets the same reply.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from backend.domain.events import Finished, ProviderEvent, TextDelta, UsageReported
from backend.domain.messages import Usage
from backend.domain.requests import ChatRequest
from backend.providers.canned_text import last_user_text, prompt_words, quote, word_count

MAX_FACTS = 5
_MEMORY_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}\|[^|\n]*\|(.+)$", re.MULTILINE)
_WORD = re.compile(r"\s*\S+\s*")
_TERM = re.compile(r"[\w@.+-]{3,}|[\u4e00-\u9fff]{2,}")
# Questions about what is remembered get every fact, not just the ones sharing a word.
_ASKS_MEMORY = re.compile(
    r"\b(remember|recall|know about me|my name|who am i|about me)\b|记得|我是谁|我叫什么",
    re.IGNORECASE,
)
_STOPWORDS = frozenset(
    "the and you your for are was what who how that this with have has from about said".split()
)


@dataclass
class DemoProvider:
    """The demo provider. `hint` says what makes a real model answer (the variable to set and
    the config file naming it); a session's first reply ends with it."""

    hint: str = "set the key your config names and restart"
    name: str = "demo"

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        text = demo_reply(request, hint=self.hint)
        for word in _WORD.findall(text):
            await asyncio.sleep(0)  # a chunk at a time, as a streaming model sends them
            yield TextDelta(word)
        yield UsageReported(Usage(prompt_words(request), word_count(text)))
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


def demo_reply(request: ChatRequest, *, hint: str) -> str:
    """What memory holds about the message first, then the message quoted; the notice that no
    real model answers closes a session's first reply only (the page and the terminal say it
    too), so the conversation reads as memory at work, not as the same notice each turn."""
    said = last_user_text(request)
    facts = remembered_facts(request.system)
    relevant = facts if _ASKS_MEMORY.search(said) else _sharing_terms(facts, said)
    if relevant:
        memory = "From memory I recall: " + "; ".join(relevant[-MAX_FACTS:]) + "."
    elif facts:
        count = f"{len(facts)} {_plural(len(facts), 'fact')}"
        memory = f"I remember {count} from earlier turns, none about this."
    else:
        memory = (
            "Nothing has left the window yet. Tell me about yourself (your name, a number, "
            "“remember …”): after a few turns the oldest ones are summarized into memory."
        )
    paragraphs = [memory, f"You said: “{quote(said)}”."]
    if is_first_reply(request):
        paragraphs.append(
            "*This is Tally's built-in demo provider: no real model is answering. To talk to "
            f"one, {hint}.*"
        )
    return "\n\n".join(paragraphs)


def is_first_reply(request: ChatRequest) -> bool:
    """True when no reply of the session precedes the message: its window always keeps the
    latest turns, so a later turn's request holds an earlier reply."""
    return not any(message.role == "assistant" for message in request.messages)


def _plural(count: int, noun: str) -> str:
    return noun if count == 1 else noun + "s"


def remembered_facts(system_prompt: str) -> list[str]:
    """The content of each memory line in the prompt, oldest first, without repeats."""
    found: dict[str, None] = {}
    for match in _MEMORY_LINE.finditer(system_prompt):
        found.setdefault(match.group(1).strip(), None)
    return list(found)


def _sharing_terms(facts: list[str], said: str) -> list[str]:
    terms = _terms(said) - _STOPWORDS
    return [fact for fact in facts if terms & _terms(fact)]


def _terms(text: str) -> set[str]:
    return {term.strip(".+-").casefold() for term in _TERM.findall(text)}
