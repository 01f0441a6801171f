"""The scripted provider: the fake model other tests rely on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from backend.domain.events import (
    Finished,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallRequested,
    UsageReported,
)
from backend.domain.messages import ToolCall, Usage
from backend.domain.requests import ChatRequest, RequestMessage
from backend.errors import EmptyReply, ProviderBadResponse, ProviderRateLimited
from backend.providers.scripted import (
    ScriptedProvider,
    ScriptedStreamCut,
    ScriptedThinking,
    ScriptedToolCalls,
)


async def collect(events: AsyncIterator[ProviderEvent]) -> list[ProviderEvent]:
    return [event async for event in events]


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_text_reply_streams_in_word_chunks(hello: ChatRequest) -> None:
    provider = ScriptedProvider()
    provider.push("Fine, thanks  for asking.")

    events = await collect(provider.stream(hello))

    assert text_of(events) == "Fine, thanks  for asking."
    assert sum(isinstance(event, TextDelta) for event in events) == 4
    assert events[-2:] == [UsageReported(Usage(8, 4)), Finished("stop")]


async def test_steps_play_in_order_and_requests_are_recorded(hello: ChatRequest) -> None:
    provider = ScriptedProvider()
    provider.push("one", "two")

    first = text_of(await collect(provider.stream(hello)))
    second = text_of(await collect(provider.stream(hello)))

    assert (first, second) == ("one", "two")
    assert provider.requests == [hello, hello]


async def test_tool_calls_step_yields_calls_after_text(hello: ChatRequest) -> None:
    call = ToolCall(id="call_1", name="now", arguments={})
    provider = ScriptedProvider()
    provider.push(ScriptedToolCalls([call], text="Let me check."))

    events = await collect(provider.stream(hello))

    assert text_of(events) == "Let me check."
    assert [e for e in events if isinstance(e, ToolCallRequested)] == [ToolCallRequested(call)]
    assert events[-1] == Finished("tool_calls")


async def test_thinking_step_streams_thinking_before_text(hello: ChatRequest) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedThinking("Hmm.", "Yes."))

    events = await collect(provider.stream(hello))

    assert events[0] == ThinkingDelta("Hmm.")
    assert text_of(events) == "Yes."


async def test_error_step_is_raised(hello: ChatRequest) -> None:
    provider = ScriptedProvider()
    provider.push(ProviderRateLimited("scripted", "slow down", retry_after=2.0))

    with pytest.raises(ProviderRateLimited):
        await collect(provider.stream(hello))


async def test_stream_cut_yields_partial_text_then_raises(hello: ChatRequest) -> None:
    provider = ScriptedProvider()
    provider.push(ScriptedStreamCut("Half an"))
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderBadResponse):
        async for event in provider.stream(hello):
            seen.append(event)

    assert text_of(seen) == "Half an"


async def test_empty_text_step_raises_empty_reply(hello: ChatRequest) -> None:
    provider = ScriptedProvider()
    provider.push("")

    with pytest.raises(EmptyReply):
        await collect(provider.stream(hello))


async def test_configured_replies_cycle_when_queue_is_empty(hello: ChatRequest) -> None:
    provider = ScriptedProvider("demo", ["A", "B"])

    replies = [text_of(await collect(provider.stream(hello))) for _ in range(3)]

    assert replies == ["A", "B", "A"]


async def test_with_nothing_scripted_it_echoes_the_user() -> None:
    provider = ScriptedProvider()
    request = ChatRequest(model="m", system="", messages=(RequestMessage("user", "Peru?"),))

    assert text_of(await collect(provider.stream(request))) == "Scripted reply to: “Peru?”"


async def test_delay_lets_a_consumer_cancel_midway(hello: ChatRequest) -> None:
    provider = ScriptedProvider(delay_s=0.05)
    provider.push("one two three four five six seven eight")
    seen: list[ProviderEvent] = []

    async def consume() -> None:
        async for event in provider.stream(hello):
            seen.append(event)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.12)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert 0 < len(seen) < 8
    assert not any(isinstance(event, Finished) for event in seen)
