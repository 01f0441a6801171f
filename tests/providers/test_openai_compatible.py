"""The OpenAI-compatible adapter, driven through the real `openai` SDK against a fake server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import openai
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
from backend.providers.openai_compatible import OpenAICompatibleProvider
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
from tests.fakes.openai_server import FakeOpenAIServer
from tests.providers.conftest import MakeOpenAI

WEATHER = ToolSpec(
    name="weather",
    description="Current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


async def collect(events: AsyncIterator[ProviderEvent]) -> list[ProviderEvent]:
    return [event async for event in events]


async def collect_until_error(
    events: AsyncIterator[ProviderEvent], seen: list[ProviderEvent]
) -> None:
    async for event in events:
        seen.append(event)


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


# ---- replies -------------------------------------------------------------------------------


async def test_streams_text_then_usage_then_finished(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(Text("Fine, thanks for asking."))

    events = await collect(openai_provider.stream(hello))

    assert text_of(events) == "Fine, thanks for asking."
    assert sum(isinstance(event, TextDelta) for event in events) > 1
    assert events[-2:] == [UsageReported(Usage(8, 4)), Finished("stop")]


async def test_reasoning_content_becomes_thinking_deltas(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(Text("42.", thinking="Six times seven."))

    events = await collect(openai_provider.stream(hello))

    thinking = "".join(event.text for event in events if isinstance(event, ThinkingDelta))
    assert thinking == "Six times seven."
    assert text_of(events) == "42."


async def test_tool_call_arguments_are_parsed(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(ToolCalls([Call("weather", {"city": "Paris"}, id="call_1")]))

    events = await collect(openai_provider.stream(hello))

    assert events[0] == ToolCallRequested(
        ToolCall(
            id="call_1",
            name="weather",
            arguments={"city": "Paris"},
            raw_arguments='{"city": "Paris"}',
        )
    )
    assert events[-1] == Finished("tool_calls")


async def test_parallel_tool_calls_arrive_complete_and_in_order(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    calls = [Call("weather", {"city": "Paris"}), Call("weather", {"city": "Oslo"})]
    openai_server.push(ToolCalls(calls, text="Checking both."))

    events = await collect(openai_provider.stream(hello))

    requested = [event.call for event in events if isinstance(event, ToolCallRequested)]
    assert [call.arguments for call in requested] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert len({call.id for call in requested}) == 2
    assert text_of(events) == "Checking both."


async def test_malformed_tool_arguments_are_flagged_not_raised(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(ToolCalls([Call("weather", '{"city": "Par')]))

    events = await collect(openai_provider.stream(hello))

    (call,) = [event.call for event in events if isinstance(event, ToolCallRequested)]
    assert call.is_malformed
    assert call.arguments == {}
    assert call.raw_arguments == '{"city": "Par'


# ---- request translation -----------------------------------------------------------------


async def test_request_carries_system_limits_and_usage_option(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    await collect(openai_provider.stream(hello))

    body = openai_server.requests[-1].body
    assert body["model"] == "test-model"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello there, how are you?"},
    ]
    assert body["max_tokens"] == 4096
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "temperature" not in body
    assert "tools" not in body


async def test_tools_temperature_and_extra_are_sent(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    request = ChatRequest(
        model="m",
        system="",
        messages=hello.messages,
        tools=(WEATHER,),
        temperature=0.3,
        extra={"top_k": 5},
    )

    await collect(openai_provider.stream(request))

    body = openai_server.requests[-1].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": WEATHER.description,
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["temperature"] == 0.3
    assert body["top_k"] == 5
    assert body["messages"][0]["role"] == "user"  # no empty system message


async def test_tool_round_trip_is_sent_in_openai_shape(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider
) -> None:
    call = ToolCall(id="call_9", name="weather", arguments={"city": "Oslo"})
    request = ChatRequest(
        model="m",
        system="sys",
        messages=(
            RequestMessage("user", "Weather in Oslo?"),
            RequestMessage("assistant", "", tool_calls=(call,)),
            RequestMessage("tool", "timeout", tool_call_id="call_9", is_error=True),
        ),
    )

    await collect(openai_provider.stream(request))

    assistant, tool = openai_server.requests[-1].body["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    assert tool == {"role": "tool", "tool_call_id": "call_9", "content": "Error: timeout"}


async def test_malformed_call_is_sent_back_with_empty_arguments(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider
) -> None:
    call = ToolCall(id="call_7", name="weather", raw_arguments='{"city": ', is_malformed=True)
    request = ChatRequest(
        model="m",
        system="",
        messages=(
            RequestMessage("user", "Weather?"),
            RequestMessage("assistant", "", tool_calls=(call,)),
            RequestMessage("tool", "arguments were not JSON", tool_call_id="call_7", is_error=True),
        ),
    )

    await collect(openai_provider.stream(request))

    assistant = openai_server.requests[-1].body["messages"][1]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_user_images_are_sent_as_data_urls(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider
) -> None:
    image = ImagePart(media_type="image/png", data="iVBORw0KGgo=")
    request = ChatRequest(
        model="m", system="", messages=(RequestMessage("user", "What is this?", images=(image,)),)
    )

    await collect(openai_provider.stream(request))

    assert openai_server.requests[-1].body["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]


async def test_configured_key_is_sent_as_bearer(
    openai_server: FakeOpenAIServer,
    make_openai,
    hello: ChatRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_VENDOR_KEY", "sk-right")
    openai_server.api_key = "sk-right"

    events = await collect(make_openai(api_key_env="TEST_VENDOR_KEY").stream(hello))

    assert text_of(events).startswith("ok: Hello there")
    assert openai_server.requests[-1].headers["authorization"] == "Bearer sk-right"


# ---- failures ------------------------------------------------------------------------------


async def test_rate_limit_carries_retry_after(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(HttpError(429, "slow down", retry_after="7"))

    with pytest.raises(ProviderRateLimited) as caught:
        await collect(openai_provider.stream(hello))

    assert caught.value.retry_after == 7.0
    assert isinstance(caught.value.__cause__, openai.RateLimitError)


async def test_server_error_is_unavailable(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(HttpError(500))

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(openai_provider.stream(hello))

    assert caught.value.is_retryable


async def test_bad_request_is_not_retryable(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(HttpError(400, "max_tokens is too large"))

    with pytest.raises(ProviderBadRequest) as caught:
        await collect(openai_provider.stream(hello))

    assert not caught.value.is_retryable


async def test_wrong_key_is_auth_failed(
    openai_server: FakeOpenAIServer,
    make_openai,
    hello: ChatRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_VENDOR_KEY", "sk-wrong")
    openai_server.api_key = "sk-right"

    with pytest.raises(ProviderAuthFailed):
        await collect(make_openai(api_key_env="TEST_VENDOR_KEY").stream(hello))


async def test_slow_server_is_a_timeout(
    openai_server: FakeOpenAIServer, make_openai, hello: ChatRequest
) -> None:
    openai_server.push(Delay(2.0))

    with pytest.raises(ProviderTimeout):
        await collect(make_openai(timeout_s=0.2).stream(hello))


async def test_refused_connection_is_unavailable(
    hello: ChatRequest, make_openai, refused_port: int
) -> None:
    with pytest.raises(ProviderUnavailable):
        url = f"http://127.0.0.1:{refused_port}/v1"
        await collect(make_openai(base_url=url).stream(hello))


async def test_stream_cut_midway_is_bad_response_after_partial_text(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(StreamCut("one two three four five", sent_words=2))
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderBadResponse):
        await collect_until_error(openai_provider.stream(hello), seen)

    assert seen == [TextDelta("one "), TextDelta("two ")]


async def test_error_inside_the_stream_is_bad_response(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(StreamError("server_error", "upstream failed", text="Par"))

    with pytest.raises(ProviderBadResponse):
        await collect(openai_provider.stream(hello))


async def test_empty_reply_raises_empty_reply(
    openai_server: FakeOpenAIServer, openai_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    openai_server.push(Empty())

    with pytest.raises(EmptyReply):
        await collect(openai_provider.stream(hello))


SHAPELESS = [
    {},
    {"id": "x", "object": "chat.completion", "choices": []},
    {"id": "x", "object": "chat.completion", "choices": None},
    {"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]},  # no message
]


@pytest.mark.parametrize("body", SHAPELESS)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_shape_valid_answer_without_choices_is_a_bad_response(
    openai_server: FakeOpenAIServer,
    make_openai: MakeOpenAI,
    hello: ChatRequest,
    body: dict[str, object],
    stream: bool,
) -> None:
    openai_server.push(Shapeless(body))
    with pytest.raises(ProviderBadResponse) as caught:
        await collect(make_openai().stream(replace(hello, stream=stream)))
    assert caught.value.is_retryable  # retried and falling back like other bad answers
    assert caught.value.message.startswith("openai (")
