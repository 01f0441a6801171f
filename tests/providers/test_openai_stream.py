"""Streamed Chat Completions answers decoded without the SDK's chunk models: the SSE decoder on
byte blocks cut where the test says, then the adapter against a fake server that sends raw SSE."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import httpx2
import openai
import pytest

from backend.domain.events import (
    Finished,
    ProviderEvent,
    TextDelta,
    ToolCallRequested,
    UsageReported,
)
from backend.domain.messages import Usage
from backend.domain.requests import ChatRequest
from backend.errors import ProviderBadResponse
from backend.providers.openai_compatible import OpenAICompatibleProvider
from backend.providers.openai_stream import DEFAULT_STREAM_ERROR, event_payloads
from tests.fakes import Answer, Call, RecordedRequest, Reply, ToolCalls
from tests.fakes.openai_server import FakeOpenAIServer
from tests.providers.conftest import MakeOpenAI, provider_settings

URL = "http://vendor.test/v1/chat/completions"


async def blocks(pieces: tuple[bytes | Exception, ...]) -> AsyncIterator[bytes]:
    for piece in pieces:
        if isinstance(piece, Exception):
            raise piece
        yield piece


def response_of(*pieces: bytes | Exception) -> httpx2.Response:
    """A streamed response whose body arrives in exactly these blocks (an exception: the read
    fails there)."""
    return httpx2.Response(200, content=blocks(pieces), request=httpx2.Request("POST", URL))


async def payloads(response: httpx2.Response) -> list[Any]:
    return [payload async for payload in event_payloads(response)]


# ---- the SSE decoder -------------------------------------------------------------------------


async def test_multi_line_data_is_one_payload_joined_by_newlines() -> None:
    response = response_of(b'data: {"choices":\ndata: [],\ndata:"n": 1}\n\ndata: [DONE]\n\n')

    assert await payloads(response) == [{"choices": [], "n": 1}]


async def test_comments_keep_alives_and_other_fields_are_ignored() -> None:
    response = response_of(
        b": OPENROUTER PROCESSING\n\n",
        b"event: message\nid: 7\nretry: 100\nunknown: x\ndata: 1\n\n",
        b":\n\nevent: ping\n\n",  # an event without data is no payload
        b"data: 2\n\n",
    )

    assert await payloads(response) == [1, 2]


async def test_lines_may_end_in_lf_cr_or_crlf_even_split_between_blocks() -> None:
    response = response_of(b"data: [1,\r", b"\ndata: 2]\r\n\r", b"\ndata: 3\r\r", b"data: 4\n\n")

    assert await payloads(response) == [[1, 2], 3, 4]


async def test_a_payload_split_anywhere_between_blocks_is_reassembled() -> None:
    text = json.dumps({"content": "héllo wörld"}, ensure_ascii=False).encode()
    body = b"da" + b"ta: " + text + b"\n\n"
    split = body.index("ö".encode()) + 1  # inside the two bytes of one character
    response = response_of(body[:5], body[5:split], body[split:])

    assert await payloads(response) == [{"content": "héllo wörld"}]


async def test_unicode_line_separators_inside_json_do_not_end_a_line() -> None:
    text = "one\u2028two\u2029three\x85four\x0cfive"
    data = json.dumps({"content": text}, ensure_ascii=False).encode()

    assert await payloads(response_of(b"data: " + data + b"\n\n")) == [{"content": text}]


async def test_the_stream_ends_at_done_and_the_response_is_closed() -> None:
    response = response_of(b"data: 1\n\ndata: [DONE]\n\n", b"data: 2\n\n")

    assert await payloads(response) == [1]
    assert response.is_closed


async def test_an_event_the_body_ends_inside_is_dropped() -> None:
    response = response_of(b"data: 1\n\ndata: 2\n")

    assert await payloads(response) == [1]


async def test_data_that_is_not_json_raises_json_decode_error() -> None:
    response = response_of(b"data: 1\n\ndata: {not json\n\n")

    with pytest.raises(json.JSONDecodeError):
        await payloads(response)
    assert response.is_closed


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ({"message": "upstream overloaded", "type": "server_error"}, "upstream overloaded"),
        ({"type": "server_error"}, DEFAULT_STREAM_ERROR),
        ("something broke", DEFAULT_STREAM_ERROR),
    ],
)
async def test_an_error_payload_raises_the_sdks_api_error(error: object, message: str) -> None:
    data = json.dumps({"error": error}).encode()
    response = response_of(b"data: 1\n\nevent: error\ndata: " + data + b"\n\ndata: 2\n\n")
    seen: list[Any] = []

    with pytest.raises(openai.APIError) as caught:
        async for payload in event_payloads(response):
            seen.append(payload)

    assert seen == [1]
    assert caught.value.message == message
    assert caught.value.body == error
    assert response.is_closed


async def test_a_failed_read_is_the_sdks_connection_error() -> None:
    cut = httpx2.RemoteProtocolError("peer closed connection without sending complete body")
    response = response_of(b"data: 1\n\ndata: {", cut)

    with pytest.raises(openai.APIConnectionError) as caught:
        await payloads(response)

    assert not isinstance(caught.value, openai.APITimeoutError)
    assert caught.value.__cause__ is cut
    assert response.is_closed


async def test_a_stalled_read_is_the_sdks_timeout_error() -> None:
    stall = httpx2.ReadTimeout("timed out")

    with pytest.raises(openai.APITimeoutError) as caught:
        await payloads(response_of(b"data: 1\n\n", stall))

    assert caught.value.__cause__ is stall


async def test_a_consumer_that_stops_early_closes_the_response() -> None:
    response = response_of(b"data: 1\n\ndata: 2\n\n")
    events = event_payloads(response)

    assert await anext(events) == 1
    await events.aclose()

    assert response.is_closed


# ---- the adapter on raw SSE --------------------------------------------------------------------

CUT = object()  # in a scripted body: close the socket here, mid-body


class RawSSEServer(FakeOpenAIServer):
    """Answers each call with the next scripted body: a list of pieces, each sent as one HTTP
    chunk of an SSE stream (`CUT` closes the socket there), or bytes sent as an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[list[object] | bytes] = []

    async def answer(self, step: Answer, request: RecordedRequest, reply: Reply) -> None:
        body = self.bodies.pop(0)
        if isinstance(body, bytes):
            await reply.raw(200, body, "text/html")
            return
        await reply.start_stream()
        for piece in body:
            if piece is CUT:
                reply.cut()
                return
            await reply.send(str(piece))
        await reply.end_stream()


@pytest.fixture
def raw_server() -> Iterator[RawSSEServer]:
    with RawSSEServer() as server:
        yield server


@pytest.fixture
async def raw_provider(raw_server: RawSSEServer) -> AsyncIterator[OpenAICompatibleProvider]:
    settings = provider_settings("openai_compatible", base_url=raw_server.base_url)
    provider = OpenAICompatibleProvider("openai", settings)
    yield provider
    await provider.aclose()


def sse(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


def delta(content: dict[str, Any], finish_reason: str | None = None) -> str:
    return sse({"choices": [{"index": 0, "delta": content, "finish_reason": finish_reason}]})


DONE = "data: [DONE]\n\n"


async def events_until_error(
    provider: OpenAICompatibleProvider, request: ChatRequest, seen: list[ProviderEvent]
) -> None:
    async for event in provider.stream(request):
        seen.append(event)


async def test_keep_alives_and_multi_line_chunks_reach_the_reply(
    raw_server: RawSSEServer, raw_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    multi_line = delta({"content": "there"}).replace(', "delta"', '\ndata: , "delta"', 1)
    raw_server.bodies.append(
        [": keep-alive\n\n", delta({"content": "Hi "}), multi_line, delta({}, "stop"), DONE]
    )

    events = [event async for event in raw_provider.stream(hello)]

    assert events == [TextDelta("Hi "), TextDelta("there"), Finished("stop")]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 9, "completion_tokens": 2}, Usage(9, 2)),
        (
            {"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": {}},
            Usage(9, 2),
        ),
        (
            {
                "prompt_tokens": 9,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 3},
            },
            Usage(9, 2, 4, 3),
        ),
        (  # DeepSeek
            {"prompt_tokens": 9, "completion_tokens": 2, "prompt_cache_hit_tokens": 5},
            Usage(9, 2, 5),
        ),
        (
            {
                "prompt_tokens": 9,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": None},
                "prompt_cache_hit_tokens": 5,
            },
            Usage(9, 2, 5),
        ),
    ],
)
async def test_a_chunk_with_usage_only_reports_the_usage(
    raw_server: RawSSEServer,
    raw_provider: OpenAICompatibleProvider,
    hello: ChatRequest,
    usage: dict[str, Any],
    expected: Usage,
) -> None:
    usage_only = sse({"id": "x", "choices": [], "usage": usage})
    raw_server.bodies.append([delta({"content": "Hi"}, "stop"), usage_only, DONE])

    events = [event async for event in raw_provider.stream(hello)]

    assert events == [TextDelta("Hi"), UsageReported(expected), Finished("stop")]


async def test_an_error_event_inside_the_stream_is_a_bad_response_with_its_message(
    raw_server: RawSSEServer, raw_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    error = {"error": {"message": "upstream overloaded", "type": "server_error"}}
    raw_server.bodies.append([delta({"content": "Par"}), f"event: error\n{sse(error)}"])
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderBadResponse) as caught:
        await events_until_error(raw_provider, hello, seen)

    assert seen == [TextDelta("Par")]
    assert caught.value.message.endswith("): unusable response: upstream overloaded")
    assert caught.value.is_retryable
    assert isinstance(caught.value.__cause__, openai.APIError)


async def test_a_stream_cut_inside_a_chunk_is_a_bad_response_after_the_text_so_far(
    raw_server: RawSSEServer, raw_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    raw_server.bodies.append([delta({"content": "one "}), 'data: {"choices": [{"ind', CUT])
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderBadResponse) as caught:
        await events_until_error(raw_provider, hello, seen)

    assert seen == [TextDelta("one ")]
    assert caught.value.message.endswith("): the stream was cut before it finished")


@pytest.mark.parametrize(
    ("chunk", "words"),
    [
        ("data: {not json\n\n", "unusable response: Expecting property name enclosed in double"),
        ("data: [1, 2]\n\n", "a chunk is not a JSON object"),
        (sse({"choices": {"index": 0}}), "its choices are not a list"),
        (sse({"choices": [{"index": 0, "finish_reason": "stop"}]}), "a chunk's choice has no"),
        (sse({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "c"}]}}]}), "a tool call"),
        (sse({"choices": [], "usage": 12}), "its usage is not an object"),
        (sse({"choices": []}), "the stream ended without a finish reason"),
    ],
)
async def test_a_chunk_of_the_wrong_shape_is_a_bad_response(
    raw_server: RawSSEServer,
    raw_provider: OpenAICompatibleProvider,
    hello: ChatRequest,
    chunk: str,
    words: str,
) -> None:
    raw_server.bodies.append([delta({"content": "Hi"}), chunk, DONE])

    with pytest.raises(ProviderBadResponse) as caught:
        async for _event in raw_provider.stream(hello):
            pass

    assert f"{raw_server.base_url}): {words}" in caught.value.message


async def test_a_non_streamed_answer_that_is_not_json_is_a_bad_response(
    raw_server: RawSSEServer, raw_provider: OpenAICompatibleProvider, hello: ChatRequest
) -> None:
    raw_server.bodies.append(b"<html>502 Bad Gateway</html>")

    with pytest.raises(ProviderBadResponse) as caught:
        async for _event in raw_provider.stream(replace(hello, stream=False)):
            pass

    assert "): unusable response: Expecting value: line 1 column 1" in caught.value.message


async def test_a_non_streamed_answer_gives_the_events_of_its_stream(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI, hello: ChatRequest
) -> None:
    calls = [Call("weather", {"city": "Paris"}, id="call_1"), Call("weather", {"city": "Oslo"})]
    openai_server.push(ToolCalls(calls, text="Checking.", thinking="Two cities."))
    request = replace(hello, stream=False)

    events = [event async for event in make_openai().stream(request)]

    requested = [event.call for event in events if isinstance(event, ToolCallRequested)]
    assert [(call.id, call.arguments) for call in requested] == [
        ("call_1", {"city": "Paris"}),
        ("call_fake_1", {"city": "Oslo"}),
    ]
    assert TextDelta("Checking.") in events
    assert isinstance(events[-2], UsageReported)
    assert events[-1] == Finished("tool_calls")
    assert "stream" not in openai_server.requests[-1].body
