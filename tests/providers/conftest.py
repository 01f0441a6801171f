"""Fixtures for the provider tests: fake vendor servers, adapters pointed at them, and a
`sleep` that records instead of waiting. (tests/conftest.py clears the vendor environment.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from backend.domain.requests import ChatRequest, RequestMessage
from backend.providers.anthropic import AnthropicProvider
from backend.providers.openai_compatible import OpenAICompatibleProvider
from backend.settings import ProviderSettings
from tests.fakes import RecordingSleep
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def provider_settings(kind: str, **values: object) -> ProviderSettings:
    defaults: dict[str, object] = {"kind": kind, "timeout_s": 5.0, "connect_timeout_s": 2.0}
    return ProviderSettings.model_validate(defaults | values)


MakeOpenAI = Callable[..., OpenAICompatibleProvider]
MakeAnthropic = Callable[..., AnthropicProvider]


@pytest.fixture
async def make_openai(openai_server: FakeOpenAIServer) -> AsyncIterator[MakeOpenAI]:
    """Builds adapters on the fake server; keyword arguments override `ProviderSettings`."""
    made: list[OpenAICompatibleProvider] = []

    def make(**overrides: object) -> OpenAICompatibleProvider:
        settings = provider_settings(
            "openai_compatible", **({"base_url": openai_server.base_url} | overrides)
        )
        made.append(OpenAICompatibleProvider("openai", settings))
        return made[-1]

    yield make
    for provider in made:
        await provider.aclose()


@pytest.fixture
async def make_anthropic(anthropic_server: FakeAnthropicServer) -> AsyncIterator[MakeAnthropic]:
    """Builds adapters on the fake server; keyword arguments override `ProviderSettings`."""
    made: list[AnthropicProvider] = []

    def make(**overrides: object) -> AnthropicProvider:
        settings = provider_settings(
            "anthropic", **({"base_url": anthropic_server.base_url} | overrides)
        )
        made.append(AnthropicProvider("anthropic", settings))
        return made[-1]

    yield make
    for provider in made:
        await provider.aclose()


@pytest.fixture
def openai_provider(make_openai: MakeOpenAI) -> OpenAICompatibleProvider:
    return make_openai()


@pytest.fixture
def anthropic_provider(make_anthropic: MakeAnthropic) -> AnthropicProvider:
    return make_anthropic()


@pytest.fixture
def hello() -> ChatRequest:
    return ChatRequest(
        model="test-model",
        system="You are terse.",
        messages=(RequestMessage("user", "Hello there, how are you?"),),
    )


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()
