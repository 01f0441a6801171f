"""A fake summarizer model: it reads the overflow prompt and answers in the asked format,
one fact per new user message, quoting the user verbatim. Fed to Tally as a ChatProvider."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from backend.domain.events import Finished, ProviderEvent, TextDelta, UsageReported
from backend.domain.messages import Usage
from backend.domain.requests import ChatRequest

NEW_USER_LINE = re.compile(r"^\[new\] user: (.*)$", re.MULTILINE)


@dataclass
class EchoSummarizer:
    """Answers `## Memory` with `- user said: <text>` per [new] user message, and a summary
    counting the messages (or `summary`, when given). `calls` counts the requests it answered."""

    name: str = "echo-summarizer"
    summary: str | None = None
    calls: int = 0
    requests: list[ChatRequest] = field(default_factory=list)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        self.calls += 1
        self.requests.append(request)
        prompt = request.messages[-1].content
        said = NEW_USER_LINE.findall(prompt)
        memory = "\n".join(f"- user said: {text}" for text in said) or "NOTHING TO RECORD"
        summary = self.summary or f"The user sent {len(said)} new messages."
        answer = f"## Memory\n{memory}\n\n## Summary\n{summary}"
        yield TextDelta(answer)
        yield UsageReported(Usage(prompt_tokens=len(prompt) // 4, completion_tokens=20))
        yield Finished("stop")

    async def aclose(self) -> None:
        return None
