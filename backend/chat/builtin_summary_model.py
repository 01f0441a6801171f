"""The offline demo's rule-based summarizer (DemoSummarizer) served as a summarizer model, for
`tally eval memory --summarizer builtin` and `tally bench`: the real Summarizer still renders its
prompt around it, parses the answer, runs the fidelity gate and applies the lines it replaces.

The model reads back from the prompt what the Summarizer put there (the `[new]` and `[known]`
messages, the previous summary, the current lines it may replace as `[L1] …`), hands them to
DemoSummarizer and answers in the asked format. Deterministic: the same prompt, the same answer.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime

from backend.chat.demo_summarizer import DEMO_SUMMARY_MODEL, DemoSummarizer
from backend.chat.fidelity import extract_identifiers
from backend.chat.prompts import PromptRenderer
from backend.chat.summarizer import SummaryModel, SummaryOutput, SummaryPrompt
from backend.domain.events import Finished, ProviderEvent, TextDelta, UsageReported
from backend.domain.messages import Role, StoredMessage
from backend.domain.requests import ChatRequest
from backend.errors import ProviderBadResponse
from backend.memory.entries import MemoryEntry

MESSAGES_HEADINGS = {"# Messages": "en", "# 消息": "zh"}
SUMMARY_HEADINGS = ("# Previous summary", "# 之前的摘要")
NO_SUMMARY = ("(none)", "（无）")
_MESSAGE = re.compile(r"^\[(new|known)\] (user|assistant): (.*)$")
_REPLACEABLE = re.compile(r"^\[(L\d+)\] (.*)$")
_SAID_ON = re.compile(r"^\(said on (\d{4}-\d{2}-\d{2})\)$")


def read_prompt(prompt: str) -> SummaryPrompt | None:
    """The messages, previous summary and replaceable lines of an overflow summary prompt (the
    replaceable lines' ids are the prompt's labels, L1, L2, …); None when it holds no message
    in the form the templates write."""
    lines = prompt.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() in MESSAGES_HEADINGS]
    if not starts:
        return None
    start = starts[-1]
    headings = [i for i, line in enumerate(lines[:start]) if line.strip() in SUMMARY_HEADINGS]
    summary_at = headings[-1] if headings else start
    previous = "\n".join(lines[summary_at + 1 : start]).strip()
    messages = _messages(lines[start + 1 :])
    if not messages:
        return None
    fresh = [m.id for m, is_new in messages if is_new]
    today = date.today()
    replaceable = tuple(
        MemoryEntry(id=match[1], date=today, source="auto-overflow", content=match[2])
        for line in lines[:summary_at]
        if (match := _REPLACEABLE.match(line))
    )
    return SummaryPrompt(
        messages=tuple(m for m, _ in messages),
        memory_from_id=fresh[0] if fresh else messages[-1][0].id + 1,
        previous_summary="" if previous in NO_SUMMARY else previous,
        language=MESSAGES_HEADINGS[lines[start].strip()],
        replaceable=replaceable,
    )


def _messages(lines: list[str]) -> list[tuple[StoredMessage, bool]]:
    """(message, is it [new]) for each message line; a line of no message continues the one
    before it (a message with line breaks)."""
    found: list[tuple[StoredMessage, bool]] = []
    now = datetime.now(UTC)
    for line in lines:
        if said_on := _SAID_ON.match(line):  # the date the messages after it were said
            now = datetime.fromisoformat(said_on[1]).replace(tzinfo=UTC)
            continue
        match = _MESSAGE.match(line)
        if match is None:
            if found and line.strip():
                message, is_new = found[-1]
                extended = f"{message.content}\n{line}"
                found[-1] = (_message(message.id, message.role, extended, now), is_new)
            continue
        role: Role = "user" if match[2] == "user" else "assistant"
        found.append((_message(len(found) + 1, role, match[3], now), match[1] == "new"))
    return found


def _message(message_id: int, role: Role, content: str, at: datetime) -> StoredMessage:
    return StoredMessage(
        id=message_id,
        session_id="eval",
        role=role,
        content=content,
        turn_id=f"eval-{message_id}",
        status="complete",
        created_at=at,
    )


class BuiltinSummaryModel:
    """A ChatProvider that answers overflow summary prompts with DemoSummarizer's rules."""

    name = "builtin"

    def __init__(self, prompts: PromptRenderer) -> None:
        self._rules = DemoSummarizer(self, prompts)
        self._model = SummaryModel(self, DEMO_SUMMARY_MODEL)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        asked = read_prompt(request.messages[-1].content if request.messages else "")
        if asked is None:
            raise ProviderBadResponse(self.name, "not an overflow summary prompt")
        new_user_texts = [
            m.content for m in asked.messages if m.role == "user" and m.id >= asked.memory_from_id
        ]
        asked = dataclasses.replace(asked, keep=extract_identifiers(new_user_texts))
        output = await self._rules.distill(self._model, asked)
        yield TextDelta(answer_text(output))
        yield UsageReported(output.usage)
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


def answer_text(output: SummaryOutput) -> str:
    """The two sections the prompt asks for; the lines replaced are named on the first fact."""
    facts = list(output.facts)
    if facts and output.supersedes:
        facts[0] = f"(replaces {', '.join(output.supersedes)}) {facts[0]}"
    memory = "\n".join(f"- {fact}" for fact in facts) or "NOTHING TO RECORD"
    return f"## Memory\n{memory}\n\n## Summary\n{output.summary}"
