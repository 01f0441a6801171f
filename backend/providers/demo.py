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
    """The demo provider. `key_env` is the variable that would make a real model answer."""

    key_env: str | None = None
    name: str = "demo"

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        text = demo_reply(request, key_env=self.key_env)
        for word in _WORD.findall(text):
            await asyncio.sleep(0)  # a chunk at a time, as a streaming model sends them
            yield TextDelta(word)
        yield UsageReported(Usage(prompt_words(request), word_count(text)))
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


def demo_reply(request: ChatRequest, *, key_env: str | None) -> str:
    said = last_user_text(request)
    facts = remembered_facts(request.system)
    relevant = facts if _ASKS_MEMORY.search(said) else _sharing_terms(facts, said)
    lines = [
        "**Demo reply**: this is Tally's built-in demo provider; no LLM API key is "
        f"configured, so no real model is answering. You said: “{quote(said)}”.",
        "",
    ]
    if relevant:
        lines.append("From memory I recall: " + "; ".join(relevant[-MAX_FACTS:]) + ".")
    elif facts:
        lines.append(f"I remember {len(facts)} fact(s) from earlier turns, none about this.")
    else:
        lines.append(
            "Nothing has left the window yet. Tell me about yourself (your name, a number, "
            "“remember …”): after a few turns the oldest ones are summarized into memory."
        )
    key = key_env or "OPENAI_API_KEY"
    lines += ["", f"To talk to a real model, set {key} (or edit config.yaml) and restart."]
    return "\n".join(lines)


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
