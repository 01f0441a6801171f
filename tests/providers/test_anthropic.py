"""The Anthropic adapter, driven through the real `anthropic` SDK against a fake server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anthropic
import pytest

from backend.domain.events import (
    Finished,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallRequested,
    UsageReported,
)
from backend.domain.messages import ImagePart, ToolCall, Usage
from backend.domain.requests import ChatRequest, RequestMessage, ToolSpec
from backend.errors import (
    EmptyReply,
    ProviderAuthFailed,
    ProviderBadRequest,
    ProviderBadResponse,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
)
from backend.providers.anthropic import AnthropicProvider
from tests.fakes import (
    Call,
    Delay,
    Empty,
    HttpError,
    Shapeless,
    StreamCut,
    StreamError,
    Text,
    ToolCalls,
)
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.providers.conftest import MakeAnthropic

WEATHER = ToolSpec(
    name="weather",
    description="Current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


async def collect(events: AsyncIterator[ProviderEvent]) -> list[ProviderEvent]:
    return [event async for event in events]


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


# ---- replies -------------------------------------------------------------------------------


async def test_streams_text_then_usage_then_finished(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(Text("Fine, thanks for asking."))

    events = await collect(anthropic_provider.stream(hello))

    assert text_of(events) == "Fine, thanks for asking."
    assert sum(isinstance(event, TextDelta) for event in events) > 1
    # input tokens come from message_start, output tokens from message_delta
    assert events[-2:] == [UsageReported(Usage(8, 4)), Finished("stop")]


async def test_thinking_block_becomes_thinking_deltas(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(Text("42.", thinking="Six times seven."))

    events = await collect(anthropic_provider.stream(hello))

    thinking = "".join(event.text for event in events if isinstance(event, ThinkingDelta))
    assert thinking == "Six times seven."
    assert text_of(events) == "42."


async def test_tool_use_input_is_parsed(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(ToolCalls([Call("weather", {"city": "Paris"}, id="toolu_1")]))

    events = await collect(anthropic_provider.stream(hello))

    assert events[0] == ToolCallRequested(
        ToolCall(
            id="toolu_1",
            name="weather",
            arguments={"city": "Paris"},
            raw_arguments='{"city": "Paris"}',
        )
    )
    assert events[-1] == Finished("tool_calls")


async def test_parallel_tool_uses_arrive_complete_and_in_order(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    calls = [Call("weather", {"city": "Paris"}), Call("weather", {"city": "Oslo"})]
    anthropic_server.push(ToolCalls(calls, text="Checking both."))

    events = await collect(anthropic_provider.stream(hello))

    requested = [event.call for event in events if isinstance(event, ToolCallRequested)]
    assert [call.arguments for call in requested] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert len({call.id for call in requested}) == 2
    assert text_of(events) == "Checking both."


async def test_malformed_tool_input_is_flagged_not_raised(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(ToolCalls([Call("weather", '{"city": "Par')]))

    events = await collect(anthropic_provider.stream(hello))

    (call,) = [event.call for event in events if isinstance(event, ToolCallRequested)]
    assert call.is_malformed
    assert call.arguments == {}
    assert call.raw_arguments == '{"city": "Par'


# ---- request translation -------------------------------------------------------------------


async def test_system_is_top_level_and_tools_use_input_schema(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    request = ChatRequest(
        model="claude-test",
        system="You are terse.",
        messages=hello.messages,
        tools=(WEATHER,),
        max_output_tokens=512,
    )

    await collect(anthropic_provider.stream(request))

    body = anthropic_server.requests[-1].body
    # One block, marked as a cache breakpoint: tools and system are reused by every turn.
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 512
    assert body["stream"] is True
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hello there, how are you?"}]}
    ]
    assert body["tools"] == [
        {
            "name": "weather",
            "description": WEATHER.description,
            "input_schema": WEATHER.parameters,
        }
    ]
    assert "temperature" not in body


async def test_temperature_is_sent_only_when_set(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    request = ChatRequest(model="m", system="", messages=hello.messages, temperature=0.2)

    await collect(anthropic_provider.stream(request))

    body = anthropic_server.requests[-1].body
    assert body["temperature"] == 0.2
    assert "system" not in body


async def test_tool_results_are_merged_into_one_user_message(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    paris = ToolCall(id="toolu_a", name="weather", arguments={"city": "Paris"})
    oslo = ToolCall(id="toolu_b", name="weather", arguments={"city": "Oslo"})
    request = ChatRequest(
        model="m",
        system="",
        messages=(
            RequestMessage("user", "Weather in Paris and Oslo?"),
            RequestMessage("assistant", "Checking.", tool_calls=(paris, oslo)),
            RequestMessage("tool", "18 °C", tool_call_id="toolu_a"),
            RequestMessage("tool", "no data", tool_call_id="toolu_b", is_error=True),
        ),
    )

    await collect(anthropic_provider.stream(request))

    messages = anthropic_server.requests[-1].body["messages"]
    assert [message["role"] for message in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_b", "name": "weather", "input": {"city": "Oslo"}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18 °C"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": "no data",
            "is_error": True,
            # the step's end is a cache breakpoint: the loop's next step reads up to it
            "cache_control": {"type": "ephemeral"},
        },
    ]


async def test_consecutive_same_role_messages_are_merged(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    request = ChatRequest(
        model="m",
        system="",
        messages=(RequestMessage("user", "first"), RequestMessage("user", "second")),
    )

    await collect(anthropic_provider.stream(request))

    assert anthropic_server.requests[-1].body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        }
    ]


async def test_user_images_are_sent_as_base64_blocks(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    image = ImagePart(media_type="image/png", data="iVBORw0KGgo=")
    request = ChatRequest(
        model="m", system="", messages=(RequestMessage("user", "What is this?", images=(image,)),)
    )

    await collect(anthropic_provider.stream(request))

    assert anthropic_server.requests[-1].body["messages"][0]["content"] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "text", "text": "What is this?"},
    ]


async def test_unsupported_image_type_is_bad_request(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    image = ImagePart(media_type="image/tiff", data="AAAA")
    request = ChatRequest(model="m", system="", messages=(RequestMessage("user", "?", (image,)),))

    with pytest.raises(ProviderBadRequest):
        await collect(anthropic_provider.stream(request))

    assert anthropic_server.requests == []


# ---- failures ------------------------------------------------------------------------------


async def test_rate_limit_carries_retry_after(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(HttpError(429, "slow down", retry_after="12"))

    with pytest.raises(ProviderRateLimited) as caught:
        await collect(anthropic_provider.stream(hello))

    assert caught.value.retry_after == 12.0
    assert isinstance(caught.value.__cause__, anthropic.RateLimitError)


async def test_overloaded_529_is_unavailable(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(HttpError(529, "Overloaded"))

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(anthropic_provider.stream(hello))

    assert "overloaded" in caught.value.message


async def test_overloaded_error_event_mid_stream_is_unavailable(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(StreamError("overloaded_error", "Overloaded"))

    with pytest.raises(ProviderUnavailable):
        await collect(anthropic_provider.stream(hello))


async def test_server_error_is_unavailable(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(HttpError(500))

    with pytest.raises(ProviderUnavailable):
        await collect(anthropic_provider.stream(hello))


async def test_wrong_key_is_auth_failed(
    anthropic_server: FakeAnthropicServer,
    make_anthropic,
    hello: ChatRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_VENDOR_KEY", "sk-ant-wrong")
    anthropic_server.api_key = "sk-ant-right"

    with pytest.raises(ProviderAuthFailed):
        await collect(make_anthropic(api_key_env="TEST_VENDOR_KEY").stream(hello))


async def test_slow_server_is_a_timeout(
    anthropic_server: FakeAnthropicServer, make_anthropic, hello: ChatRequest
) -> None:
    anthropic_server.push(Delay(2.0))

    with pytest.raises(ProviderTimeout):
        await collect(make_anthropic(timeout_s=0.2).stream(hello))


async def test_stream_cut_midway_is_bad_response_after_partial_text(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(StreamCut("one two three four five", sent_words=2))
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderBadResponse):
        async for event in anthropic_provider.stream(hello):
            seen.append(event)

    assert seen == [TextDelta("one "), TextDelta("two ")]


async def test_empty_reply_raises_empty_reply(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, hello: ChatRequest
) -> None:
    anthropic_server.push(Empty())

    with pytest.raises(EmptyReply):
        await collect(anthropic_provider.stream(hello))


@pytest.mark.parametrize(
    "body", [{}, {"type": "message_start"}, {"type": "message_start", "message": {}}]
)
async def test_a_stream_whose_events_carry_no_message_is_a_bad_response(
    anthropic_server: FakeAnthropicServer,
    make_anthropic: MakeAnthropic,
    hello: ChatRequest,
    body: dict[str, object],
) -> None:
    anthropic_server.push(Shapeless(body))
    with pytest.raises(ProviderBadResponse) as caught:
        await collect(make_anthropic().stream(hello))
    assert caught.value.is_retryable
