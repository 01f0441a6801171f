"""A provider that plays queued replies: the fake model of the tests (`kind: scripted`).

Steps are played in order, one per call. With the queue empty it cycles through `replies`, and
with none configured it echoes the user (the offline demo is `providers/demo.py`).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace

from backend.domain.events import (
    Finished,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallRequested,
    UsageReported,
)
from backend.domain.messages import ToolCall, Usage
from backend.domain.requests import ChatRequest
from backend.errors import EmptyReply, ProviderBadResponse, ProviderError
from backend.providers.canned_text import last_user_text, prompt_words, quote, word_count

ECHO_REPLY = "Scripted reply to: “{quote}”"
_WORD = re.compile(r"\s*\S+\s*")


@dataclass(frozen=True, slots=True)
class ScriptedToolCalls:
    """A reply that asks for tool calls, with optional text before them."""

    calls: Sequence[ToolCall]
    text: str = ""


@dataclass(frozen=True, slots=True)
class ScriptedThinking:
    """A reply that streams reasoning first, then its text."""

    thinking: str
    text: str


@dataclass(frozen=True, slots=True)
class ScriptedStreamCut:
    """A reply cut midway: `partial_text` is streamed, then `error` (default: a
    `ProviderBadResponse`) is raised."""

    partial_text: str
    error: ProviderError | None = None


ScriptedStep = str | ScriptedToolCalls | ScriptedThinking | ScriptedStreamCut | ProviderError


@dataclass
class ScriptedProvider:
    """Plays `push`ed steps, then `replies` cyclically, then an echo of the user.

    Every request is recorded in `requests`, so tests assert on what was compiled and sent.
    `delay_s` is waited before each chunk, which lets a test cancel a reply midway. `usage`,
    when set, is what every call reports instead of word counts (a prompt cache, say).
    """

    name: str = "scripted"
    replies: Sequence[str] = ()
    delay_s: float = 0.0
    usage: Usage | None = None
    requests: list[ChatRequest] = field(default_factory=list, init=False)
    _queue: deque[ScriptedStep] = field(default_factory=deque, init=False)
    _reply_count: int = field(default=0, init=False)

    def push(self, *steps: ScriptedStep) -> None:
        self._queue.extend(steps)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        step = self._next_step(request)
        if isinstance(step, ProviderError):
            raise step
        if isinstance(step, ScriptedStreamCut):
            async for event in self._text(step.partial_text):
                yield event
            raise step.error or ProviderBadResponse(self.name, "the stream was cut (scripted)")
        text, thinking, calls = _parts(step)
        if not text.strip() and not calls:
            raise EmptyReply(self.name, "the scripted reply is empty")
        if thinking:
            await asyncio.sleep(self.delay_s)
            yield ThinkingDelta(thinking)
        async for event in self._text(text):
            yield event
        for call in calls:
            yield ToolCallRequested(call)
        usage = self.usage or Usage(prompt_words(request), word_count(text))
        yield UsageReported(replace(usage))  # a copy: Usage adds up in place
        yield Finished("tool_calls" if calls else "stop")

    async def aclose(self) -> None:
        return None

    def _next_step(self, request: ChatRequest) -> ScriptedStep:
        if self._queue:
            return self._queue.popleft()
        if self.replies:
            reply = self.replies[self._reply_count % len(self.replies)]
            self._reply_count += 1
            return reply
        return ECHO_REPLY.format(quote=quote(last_user_text(request)))

    async def _text(self, text: str) -> AsyncIterator[ProviderEvent]:
        for word in _WORD.findall(text):
            # Sleeping even for 0 s gives a cancelling test a chance between chunks.
            await asyncio.sleep(self.delay_s)
            yield TextDelta(word)


def _parts(step: str | ScriptedToolCalls | ScriptedThinking) -> tuple[str, str, Sequence[ToolCall]]:
    if isinstance(step, ScriptedToolCalls):
        return step.text, "", step.calls
    if isinstance(step, ScriptedThinking):
        return step.text, step.thinking, ()
    return step, "", ()
