"""A step's reasoning goes back within its tool loop where the vendor requires it (Anthropic
thinking blocks, signed; `reasoning_content` on an opted-in OpenAI-compatible row), never where
it forbids it, and never into a later turn. The fakes refuse a request the way the vendor would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.api.sse import EVENT_NAMES
from backend.app import create_app
from backend.chat.tool_loop import LoopOutcome, run_tool_loop
from backend.domain.events import ToolCallRecord, TurnEvent
from backend.domain.messages import ToolCall
from backend.domain.requests import ChatRequest, RequestMessage
from backend.domain.thinking import ThinkingBlock
from backend.errors import ProviderBadRequest
from backend.providers.base import ChatProvider
from backend.tools.base import ToolContext
from backend.tools.registry import ToolRegistry
from tests.conftest import make_settings, serve
from tests.fakes import Call, Text, ToolCalls
from tests.fakes.anthropic_server import FakeAnthropicServer, signature_of
from tests.fakes.openai_server import FakeOpenAIServer, ReasoningRule
from tests.fakes.summarizer import EchoSummarizer
from tests.providers.conftest import MakeAnthropic, MakeOpenAI

REASONING = "Paris weather needs the tool; call it once."
REDACTED = "EncryptedOpaqueBlob=="
CONTEXT = ToolContext(tenant_id="default", session_id="s1", turn_id="t1")


class WeatherTool:
    name = "weather"
    description = "Current weather in a city."
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
    }

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        return f"sunny in {arguments.get('city')}"


TOOLS = ToolRegistry([WeatherTool()])


def weather_request(**fields: Any) -> ChatRequest:
    values: dict[str, Any] = {
        "model": "test-model",
        "system": "You are terse.",
        "messages": (RequestMessage("user", "What is the weather in Paris?"),),
        "tools": TOOLS.specs,
        "max_output_tokens": 4096,
    }
    return ChatRequest(**(values | fields))


async def run_loop(provider: ChatProvider, request: ChatRequest) -> tuple[LoopOutcome, list[Any]]:
    outcome = LoopOutcome()
    events: list[TurnEvent] = []

    async def record(result: ToolCallRecord) -> None:
        return None

    async for event in run_tool_loop(
        provider,
        request,
        tools=TOOLS,
        context=CONTEXT,
        max_iterations=4,
        record=record,
        outcome=outcome,
    ):
        events.append(event)
    return outcome, events


def assistant_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


def thinking_blocks_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in assistant_messages(body)
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] in ("thinking", "redacted_thinking")
    ]


WEATHER_CALL = Call("weather", {"city": "Paris"}, id="toolu_1")


# ---- Anthropic ----------------------------------------------------------------------------


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    """The conftest's fake (so `make_anthropic` uses it), held to the vendor's thinking rules."""
    with FakeAnthropicServer(requires_thinking_blocks=True) as server:
        yield server


async def test_anthropic_loop_sends_the_steps_signed_thinking_before_tool_use(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    anthropic_server.push(
        ToolCalls([WEATHER_CALL], thinking=REASONING, redacted_thinking=REDACTED),
        Text("Sunny in Paris.", thinking="The tool said sunny."),
    )

    outcome, events = await run_loop(
        make_anthropic(), weather_request(thinking_budget_tokens=2048, temperature=0.3)
    )

    assert outcome.is_complete and outcome.reply == "Sunny in Paris."
    assert outcome.thinking == REASONING + "The tool said sunny."
    first, second = (request.body for request in anthropic_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in first  # the API refuses temperature with thinking
    (step,) = assistant_messages(second)
    assert [block["type"] for block in step["content"]] == [
        "thinking",
        "redacted_thinking",
        "tool_use",
    ]
    assert step["content"][0] == {
        "type": "thinking",
        "thinking": REASONING,
        "signature": signature_of(REASONING),
    }
    assert step["content"][1] == {"type": "redacted_thinking", "data": REDACTED}
    # The blocks are for the next request only: no event a client could see carries them.
    assert all(type(event) in EVENT_NAMES for event in events)


async def test_anthropic_fake_refuses_a_loop_that_drops_or_alters_the_thinking(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    provider = make_anthropic()
    anthropic_server.push(ToolCalls([WEATHER_CALL], thinking=REASONING))
    await run_one_step(provider, weather_request(thinking_budget_tokens=2048))
    tool_call = ToolCall(id="toolu_1", name="weather", arguments={"city": "Paris"})
    result = RequestMessage("tool", "sunny in Paris", tool_call_id="toolu_1")
    altered = ThinkingBlock("I changed my mind.", signature=signature_of(REASONING))
    for thinking in ((), (altered,)):
        step = RequestMessage("assistant", "", tool_calls=(tool_call,), thinking=thinking)
        request = weather_request(
            thinking_budget_tokens=2048,
            messages=(*weather_request().messages, step, result),
        )
        with pytest.raises(ProviderBadRequest):
            await run_one_step(provider, request)


async def run_one_step(provider: ChatProvider, request: ChatRequest) -> None:
    async for _event in provider.stream(request):
        pass


# ---- OpenAI-compatible --------------------------------------------------------------------


def openai_fake(rule: ReasoningRule) -> FakeOpenAIServer:
    return FakeOpenAIServer(reasoning_rule=rule)


@pytest.fixture
def required_openai() -> Iterator[FakeOpenAIServer]:
    with openai_fake("required") as server:
        yield server


@pytest.mark.parametrize("is_streamed", [True, False])
async def test_openai_opt_in_sends_reasoning_content_back_within_the_loop(
    required_openai: FakeOpenAIServer, make_openai: MakeOpenAI, is_streamed: bool
) -> None:
    required_openai.push(ToolCalls([WEATHER_CALL], thinking=REASONING), Text("Sunny in Paris."))
    provider = make_openai(base_url=required_openai.base_url, reasoning_in_tool_loop=True)

    outcome, _events = await run_loop(provider, weather_request(stream=is_streamed))

    assert outcome.is_complete and outcome.reply == "Sunny in Paris."
    first, second = (request.body for request in required_openai.requests)
    assert all("reasoning_content" not in m for m in first["messages"])
    (step,) = assistant_messages(second)
    assert step["reasoning_content"] == REASONING
    assert step["tool_calls"][0]["id"] == "toolu_1"


async def test_openai_without_opt_in_never_sends_reasoning_content(
    make_openai: MakeOpenAI,
) -> None:
    with openai_fake("forbidden") as server:
        server.push(ToolCalls([WEATHER_CALL], thinking=REASONING), Text("Sunny in Paris."))
        provider = make_openai(base_url=server.base_url)

        outcome, _events = await run_loop(provider, weather_request())

        assert outcome.is_complete and outcome.reply == "Sunny in Paris."
        assert outcome.thinking == REASONING
        bodies = [request.body for request in server.requests]
    assert len(bodies) == 2
    assert all("reasoning_content" not in m for body in bodies for m in body["messages"])


async def test_openai_vendor_that_requires_reasoning_refuses_a_row_without_the_opt_in(
    required_openai: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    required_openai.push(ToolCalls([WEATHER_CALL], thinking=REASONING), Text("Sunny in Paris."))
    provider = make_openai(base_url=required_openai.base_url)

    with pytest.raises(ProviderBadRequest, match="reasoning_content"):
        await run_loop(provider, weather_request())


# ---- a new turn, through the served app ---------------------------------------------------


async def two_turns(settings_overrides: dict[str, Any], tmp_path: Path, sqlite_url: str) -> None:
    settings = make_settings(sqlite_url, tmp_path, **settings_overrides)
    app = create_app(settings, summarizer_provider=EchoSummarizer())
    async with serve(app) as client:
        first = await client.post("/api/chat/send", json={"message": "Weather in Paris?"})
        assert first.status_code == 200, first.text
        assert first.json()["reply"] == "Sunny in Paris."
        session_id = first.json()["session_id"]
        second = await client.post(
            "/api/chat/send", json={"session_id": session_id, "message": "And tomorrow?"}
        )
        assert second.status_code == 200, second.text


def tally_on(kind: str, base_url: str, **provider: Any) -> dict[str, Any]:
    row = {"kind": kind, "base_url": base_url, "max_retries": 0, **provider}
    return {
        "providers": {"fake": row},
        "model": {"provider": "fake", "name": "fake-model"},
        "tools": {"enabled": ["now"]},
    }


NOW_CALL = Call("now", {"timezone": "UTC"}, id="call_now")


async def test_a_new_turn_sends_no_anthropic_thinking_from_the_turn_before(
    tmp_path: Path, sqlite_url: str
) -> None:
    # Thinking on, through config, against a fake that refuses a loop without its blocks.
    with FakeAnthropicServer(requires_thinking_blocks=True) as server:
        server.push(
            ToolCalls([NOW_CALL], thinking=REASONING),
            Text("Sunny in Paris.", thinking="Done."),
            Text("Same tomorrow.", thinking="Guessing."),
        )
        overrides = tally_on("anthropic", server.base_url)
        overrides["model"] |= {"max_output_tokens": 4096, "thinking_budget_tokens": 2048}
        await two_turns(overrides, tmp_path, sqlite_url)
        bodies = [request.body for request in server.requests]
    loop_step, loop_answer, next_turn = bodies
    assert [b["thinking"] for b in bodies] == [{"type": "enabled", "budget_tokens": 2048}] * 3
    assert thinking_blocks_in(loop_step) == []
    assert [block["signature"] for block in thinking_blocks_in(loop_answer)] == [
        signature_of(REASONING)
    ]
    assert thinking_blocks_in(next_turn) == []
    assert [m["role"] for m in next_turn["messages"]] == ["user", "assistant", "user"]


async def test_a_new_turn_sends_no_reasoning_content_from_the_turn_before(
    tmp_path: Path, sqlite_url: str
) -> None:
    with openai_fake("required") as server:
        server.push(
            ToolCalls([NOW_CALL], thinking=REASONING),
            Text("Sunny in Paris.", thinking="Done."),
            Text("Same tomorrow.", thinking="Guessing."),
        )
        overrides = tally_on("openai_compatible", server.base_url, reasoning_in_tool_loop=True)
        await two_turns(overrides, tmp_path, sqlite_url)
        bodies = [request.body for request in server.requests]
    loop_step, loop_answer, next_turn = bodies
    assert [m.get("reasoning_content") for m in assistant_messages(loop_answer)] == [REASONING]
    assert all("reasoning_content" not in m for m in loop_step["messages"])
    assert all("reasoning_content" not in m for m in next_turn["messages"])
