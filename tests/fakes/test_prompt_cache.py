"""The fakes' prompt-cache simulation, driven by the real `openai` and `anthropic` SDKs over
HTTP: what a request reads from and writes to the cache, and that the prompt totals the fakes
always reported stay the same."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message, RawMessageStreamEvent, Usage
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.prompt_cache import LOOKBACK_BLOCKS, CacheOutcome

SYSTEM = "You are Tally, a terse assistant for one tenant's chat."  # 10 words
EPHEMERAL = {"type": "ephemeral"}
WEATHER_TOOL = {"name": "weather", "description": "Weather now", "input_schema": {}}
CLOCK_TOOL = {"name": "clock", "description": "Time now", "input_schema": {}}


# ---- OpenAI: the longest common prefix, automatically -----------------------------------------


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    # Small limits, so a 10-word system prompt is a cacheable prefix.
    with FakeOpenAIServer(cache_min_tokens=8, cache_increment=4) as server:
        yield server


@pytest.fixture
async def openai_client(openai_server: FakeOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=openai_server.base_url, api_key="test", max_retries=0
    ) as client:
        yield client


async def ask_openai(
    client: openai.AsyncOpenAI,
    question: str,
    *,
    key: str | None = None,
    system: str = SYSTEM,
    model: str = "fake-model",
    tools: Any = openai.omit,
    stream: bool = False,
) -> CompletionUsage:
    messages: Any = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    options: dict[str, Any] = {"model": model, "messages": messages, "tools": tools}
    if key is not None:
        options["prompt_cache_key"] = key
    if not stream:
        completion: ChatCompletion = await client.chat.completions.create(**options)
        assert completion.usage is not None
        return completion.usage
    chunks: openai.AsyncStream[ChatCompletionChunk] = await client.chat.completions.create(
        **options, stream=True, stream_options={"include_usage": True}
    )
    usages = [chunk.usage async for chunk in chunks if chunk.usage is not None]
    assert len(usages) == 1
    return usages[0]


def cached(usage: CompletionUsage) -> int | None:
    details = usage.prompt_tokens_details
    return None if details is None else details.cached_tokens


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_openai_same_key_reads_the_shared_prefix_rounded_down(
    openai_server: FakeOpenAIServer, openai_client: openai.AsyncOpenAI, stream: bool
) -> None:
    first = await ask_openai(openai_client, "first question here", key="t1", stream=stream)
    second = await ask_openai(openai_client, "second question now", key="t1", stream=stream)

    # 10 shared system words, rounded down to the increment of 4; prompt_tokens as always
    assert (first.prompt_tokens, cached(first)) == (13, 0)
    assert (second.prompt_tokens, cached(second)) == (13, 8)
    assert openai_server.cache_log == [CacheOutcome(13, 0, 0), CacheOutcome(13, 8, 0)]


async def test_openai_other_key_reads_nothing(openai_client: openai.AsyncOpenAI) -> None:
    await ask_openai(openai_client, "first question here", key="t1")

    other = await ask_openai(openai_client, "second question now", key="t2")
    same = await ask_openai(openai_client, "third question now", key="t1")

    assert (cached(other), cached(same)) == (0, 8)


async def test_openai_without_a_key_shares_one_pool(openai_client: openai.AsyncOpenAI) -> None:
    await ask_openai(openai_client, "first question here")

    second = await ask_openai(openai_client, "second question now")

    assert cached(second) == 8


async def test_openai_prefix_below_the_minimum_reads_nothing(
    openai_client: openai.AsyncOpenAI,
) -> None:
    await ask_openai(openai_client, "one two three four five six", system="Be terse.")

    # 7 shared words: under the minimum of 8, though 4 of them would round to a hit
    second = await ask_openai(openai_client, "one two three four five seven", system="Be terse.")

    assert cached(second) == 0


async def test_openai_other_model_reads_nothing(openai_client: openai.AsyncOpenAI) -> None:
    await ask_openai(openai_client, "first question here", model="fake-model")

    second = await ask_openai(openai_client, "second question now", model="fake-model-mini")

    assert cached(second) == 0


async def test_openai_changed_tools_break_the_prefix(openai_client: openai.AsyncOpenAI) -> None:
    def tools(*names: str) -> Any:
        return [{"type": "function", "function": {"name": name}} for name in names]

    await ask_openai(openai_client, "first question here", tools=tools("weather"))
    same = await ask_openai(openai_client, "second question now", tools=tools("weather"))
    changed = await ask_openai(openai_client, "third question now", tools=tools("clock"))

    assert (cached(same), cached(changed)) == (8, 0)


async def test_openai_cached_tokens_are_a_part_of_prompt_tokens(
    openai_server: FakeOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    messages: Any = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look at this"},
                {"type": "image_url", "image_url": {"url": "https://example.test/sky.png"}},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C sunny"},
    ]
    for _ in range(2):
        completion = await openai_client.chat.completions.create(
            model="fake-model", messages=messages
        )

    # 10 + 3 + 1 (the url) + 3 content words; roles and tool calls shape the prefix only
    assert completion.usage is not None and completion.usage.prompt_tokens == 17
    assert openai_server.cache_log == [CacheOutcome(17, 0, 0), CacheOutcome(17, 16, 0)]


async def test_openai_without_cache_simulation_reports_no_details() -> None:
    with FakeOpenAIServer(prompt_cache=False, cache_min_tokens=8, cache_increment=1) as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
            await ask_openai(client, "first question here")
            second = await ask_openai(client, "second question now")

    assert second.prompt_tokens_details is None
    assert server.cache_log[-1] == CacheOutcome(13, 0, 0)


async def test_openai_key_that_is_no_string_is_refused(
    openai_server: FakeOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await openai_client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"prompt_cache_key": 42},
        )

    assert refused.value.param == "prompt_cache_key"
    assert "expected a string, but got an integer" in refused.value.message
    assert openai_server.cache_log == []


# ---- Anthropic: explicit breakpoints, read back within the lookback ---------------------------


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(cache_min_tokens=8) as server:
        yield server


@pytest.fixture
async def anthropic_client(
    anthropic_server: FakeAnthropicServer,
) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        base_url=anthropic_server.base_url, api_key="test", max_retries=0
    ) as client:
        yield client


async def ask_anthropic(
    client: anthropic.AsyncAnthropic,
    messages: Any,
    *,
    system: Any = SYSTEM,
    tools: Any = anthropic.omit,
    stream: bool = False,
) -> Usage:
    """The usage of one call: of the message, or streamed, of `message_start`."""
    options: dict[str, Any] = {"model": "claude-fake", "max_tokens": 64, "tools": tools}
    if not stream:
        message: Message = await client.messages.create(**options, system=system, messages=messages)
        return message.usage
    events: anthropic.AsyncStream[RawMessageStreamEvent] = await client.messages.create(
        **options, system=system, messages=messages, stream=True
    )
    starts = [event.message.usage async for event in events if event.type == "message_start"]
    assert len(starts) == 1
    return starts[0]


def split(usage: Usage) -> tuple[int | None, int | None, int]:
    """(read, written, uncached) tokens of a call."""
    return usage.cache_read_input_tokens, usage.cache_creation_input_tokens, usage.input_tokens


def user(*texts: str, marked: bool = False) -> dict[str, Any]:
    """A user message of text blocks, the last one a breakpoint if `marked`."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text} for text in texts]
    if marked:
        blocks[-1]["cache_control"] = EPHEMERAL
    return {"role": "user", "content": blocks}


MARKED_SYSTEM = [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}]


async def test_anthropic_without_cache_control_caches_nothing(
    anthropic_server: FakeAnthropicServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    first = await ask_anthropic(anthropic_client, [user("hello there friend")])
    second = await ask_anthropic(anthropic_client, [user("hello there friend")])

    assert split(first) == split(second) == (0, 0, 13)
    assert anthropic_server.cache_log == [CacheOutcome(13, 0, 0)] * 2


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_anthropic_breakpoint_on_system_is_written_then_read(
    anthropic_server: FakeAnthropicServer, anthropic_client: anthropic.AsyncAnthropic, stream: bool
) -> None:
    ask = [user("first question here")], [user("another question entirely now")]
    first = await ask_anthropic(anthropic_client, ask[0], system=MARKED_SYSTEM, stream=stream)
    second = await ask_anthropic(anthropic_client, ask[1], system=MARKED_SYSTEM, stream=stream)

    assert split(first) == (0, 10, 3)
    assert split(second) == (10, 0, 4)
    assert anthropic_server.cache_log == [CacheOutcome(13, 0, 10), CacheOutcome(14, 10, 0)]


async def test_anthropic_moving_breakpoint_reads_the_previous_turn(
    anthropic_client: anthropic.AsyncAnthropic,
) -> None:
    turn_one = [user("What is the weather", marked=True)]
    turn_two = [
        user("What is the weather"),
        {"role": "assistant", "content": "It is sunny"},
        user("And tomorrow?", marked=True),
    ]

    first = await ask_anthropic(anthropic_client, turn_one)
    second = await ask_anthropic(anthropic_client, turn_two)

    assert split(first) == (0, 14, 0)
    assert split(second) == (14, 5, 0)  # found 2 blocks back of the breakpoint


async def test_anthropic_prefix_below_the_minimum_is_not_written(
    anthropic_client: anthropic.AsyncAnthropic,
) -> None:
    system = [{"type": "text", "text": "Be terse.", "cache_control": EPHEMERAL}]

    first = await ask_anthropic(anthropic_client, [user("hi")], system=system)
    second = await ask_anthropic(anthropic_client, [user("hello")], system=system)

    assert split(first) == split(second) == (0, 0, 3)


@pytest.mark.parametrize(
    ("blocks_after", "read"),
    [(LOOKBACK_BLOCKS - 1, 10), (LOOKBACK_BLOCKS, 0)],
    ids=["in-reach", "out-of-reach"],
)
async def test_anthropic_lookback_reaches_twenty_boundaries(
    anthropic_client: anthropic.AsyncAnthropic, blocks_after: int, read: int
) -> None:
    await ask_anthropic(anthropic_client, [user("hi")], system=MARKED_SYSTEM)
    # The system prompt is block 0; the breakpoint sits `blocks_after` blocks after it.
    texts = [f"part{index}" for index in range(blocks_after)]

    usage = await ask_anthropic(anthropic_client, [user(*texts, marked=True)])

    assert split(usage) == (read, 10 + blocks_after - read, 0)


async def test_anthropic_changed_tools_break_the_prefix(
    anthropic_client: anthropic.AsyncAnthropic,
) -> None:
    await ask_anthropic(anthropic_client, [user("hi")], system=MARKED_SYSTEM, tools=[WEATHER_TOOL])
    same = await ask_anthropic(
        anthropic_client, [user("hi")], system=MARKED_SYSTEM, tools=[WEATHER_TOOL]
    )
    changed = await ask_anthropic(
        anthropic_client, [user("hi")], system=MARKED_SYSTEM, tools=[WEATHER_TOOL, CLOCK_TOOL]
    )

    # tool definitions come first in the prefix, though the fake bills them no tokens
    assert split(same) == (10, 0, 1)
    assert split(changed) == (0, 10, 1)


async def test_anthropic_ttl_marks_a_breakpoint_without_changing_the_total(
    anthropic_client: anthropic.AsyncAnthropic,
) -> None:
    system = [{"type": "text", "text": SYSTEM, "cache_control": {**EPHEMERAL, "ttl": "1h"}}]

    usage = await ask_anthropic(anthropic_client, [user("hi")], system=system)

    assert split(usage) == (0, 10, 1)


async def test_anthropic_five_breakpoints_are_refused(
    anthropic_server: FakeAnthropicServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    marked = user("x", marked=True)
    four = await ask_anthropic(anthropic_client, [marked] * 3, system=MARKED_SYSTEM)

    with pytest.raises(anthropic.BadRequestError) as refused:
        await ask_anthropic(anthropic_client, [marked] * 4, system=MARKED_SYSTEM)

    assert split(four) == (0, 13, 0)  # 4 are allowed
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(
        refused.value
    )
    assert len(anthropic_server.cache_log) == 1


@pytest.mark.parametrize(
    "control",
    [{"type": "persistent"}, {"type": "ephemeral", "ttl": "2h"}, "ephemeral"],
    ids=["type", "ttl", "not-an-object"],
)
async def test_anthropic_unknown_cache_control_is_refused(
    anthropic_client: anthropic.AsyncAnthropic, control: object
) -> None:
    system = [{"type": "text", "text": SYSTEM, "cache_control": control}]

    with pytest.raises(anthropic.BadRequestError) as refused:
        await ask_anthropic(anthropic_client, [user("hi")], system=system)

    assert "system.0.cache_control" in str(refused.value)


async def test_anthropic_without_cache_simulation_reads_and_writes_nothing() -> None:
    with FakeAnthropicServer(prompt_cache=False, cache_min_tokens=8) as server:
        async with anthropic.AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
            first = await ask_anthropic(client, [user("hi")], system=MARKED_SYSTEM)
            second = await ask_anthropic(client, [user("hi")], system=MARKED_SYSTEM)

    assert split(first) == split(second) == (0, 0, 11)
