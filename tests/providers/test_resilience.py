"""Retries, fallbacks, Retry-After parsing, and the chains the registry builds from config."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from backend.domain.events import ProviderEvent, RetryScheduled, TextDelta
from backend.domain.requests import ChatRequest
from backend.errors import (
    ConfigError,
    ProviderBadRequest,
    ProviderBadResponse,
    ProviderRateLimited,
    ProviderUnavailable,
)
from backend.providers.anthropic import AnthropicProvider
from backend.providers.openai_compatible import OpenAICompatibleProvider
from backend.providers.registry import build_chat_provider
from backend.providers.resilience import (
    FallbackProvider,
    RetryingProvider,
    parse_retry_after,
)
from backend.providers.scripted import ScriptedProvider, ScriptedStreamCut
from backend.settings import ModelSettings, ProviderSettings
from tests.fakes import HttpError, RecordingSleep, Shapeless, StreamCut, Text
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer


async def collect(events: AsyncIterator[ProviderEvent]) -> list[ProviderEvent]:
    return [event async for event in events]


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


def unavailable() -> ProviderUnavailable:
    return ProviderUnavailable("scripted", "503 from upstream")


@dataclass
class ClosableScripted(ScriptedProvider):
    is_closed: bool = False

    async def aclose(self) -> None:
        self.is_closed = True


# ---- Retry-After ---------------------------------------------------------------------------


def test_retry_after_reads_seconds_http_dates_and_milliseconds() -> None:
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)

    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after": "Mon, 30 Nov 2026 12:00:20 GMT"}, now=now) == 20.0
    assert parse_retry_after({"retry-after": "Mon, 30 Nov 2026 11:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25


def test_unreadable_retry_after_is_ignored() -> None:
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None


# ---- RetryingProvider ----------------------------------------------------------------------


async def test_retry_honours_retry_after(hello: ChatRequest, sleep: RecordingSleep) -> None:
    inner = ScriptedProvider()
    inner.push(ProviderRateLimited("scripted", "slow down", retry_after=3.0), "done")
    provider = RetryingProvider(inner, max_retries=2, max_wait_s=10, sleep=sleep)

    events = await collect(provider.stream(hello))

    assert sleep.delays == [3.0]
    assert events[0] == RetryScheduled(
        attempt=1,
        delay_s=3.0,
        reason="provider_rate_limited",
        provider="scripted",
        message="scripted: slow down",
    )
    assert text_of(events) == "done"


async def test_retry_backs_off_exponentially_with_jitter(
    hello: ChatRequest, sleep: RecordingSleep
) -> None:
    inner = ScriptedProvider()
    inner.push(unavailable(), unavailable(), unavailable(), "done")
    provider = RetryingProvider(inner, max_retries=3, max_wait_s=10, sleep=sleep)

    events = await collect(provider.stream(hello))

    assert text_of(events) == "done"
    for delay, nominal in zip(sleep.delays, [0.5, 1.0, 2.0], strict=True):
        assert nominal * 0.75 <= delay <= nominal * 1.25


async def test_backoff_is_capped_at_max_wait(hello: ChatRequest, sleep: RecordingSleep) -> None:
    inner = ScriptedProvider()
    inner.push(unavailable(), unavailable(), "done")
    provider = RetryingProvider(inner, max_retries=2, max_wait_s=0.3, sleep=sleep)

    await collect(provider.stream(hello))

    assert sleep.delays == [0.3, 0.3]


async def test_retry_gives_up_after_max_retries(hello: ChatRequest, sleep: RecordingSleep) -> None:
    inner = ScriptedProvider()
    inner.push(unavailable(), unavailable(), unavailable(), "never reached")
    provider = RetryingProvider(inner, max_retries=2, max_wait_s=10, sleep=sleep)

    with pytest.raises(ProviderUnavailable):
        await collect(provider.stream(hello))

    assert len(sleep.delays) == 2
    assert len(inner.requests) == 3


async def test_retry_gives_up_when_retry_after_exceeds_max_wait(
    hello: ChatRequest, sleep: RecordingSleep
) -> None:
    inner = ScriptedProvider()
    inner.push(ProviderRateLimited("scripted", "come back later", retry_after=120.0), "done")
    provider = RetryingProvider(inner, max_retries=3, max_wait_s=30, sleep=sleep)

    with pytest.raises(ProviderRateLimited) as caught:
        await collect(provider.stream(hello))

    assert caught.value.retry_after == 120.0
    assert sleep.delays == []


async def test_no_retry_after_content_was_yielded(
    hello: ChatRequest, sleep: RecordingSleep
) -> None:
    inner = ScriptedProvider()
    inner.push(ScriptedStreamCut("Half an"), "full answer")
    provider = RetryingProvider(inner, max_retries=3, max_wait_s=10, sleep=sleep)

    with pytest.raises(ProviderBadResponse):
        await collect(provider.stream(hello))

    assert sleep.delays == []
    assert len(inner.requests) == 1


async def test_non_retryable_error_is_not_retried(
    hello: ChatRequest, sleep: RecordingSleep
) -> None:
    inner = ScriptedProvider()
    inner.push(ProviderBadRequest("scripted", "bad schema"), "done")
    provider = RetryingProvider(inner, max_retries=3, max_wait_s=10, sleep=sleep)

    with pytest.raises(ProviderBadRequest):
        await collect(provider.stream(hello))

    assert sleep.delays == []


async def test_retry_against_real_sdk_honours_retry_after_header(
    openai_server: FakeOpenAIServer,
    openai_provider: OpenAICompatibleProvider,
    hello: ChatRequest,
    sleep: RecordingSleep,
) -> None:
    openai_server.push(HttpError(429, retry_after="2"), Text("after the wait"))
    provider = RetryingProvider(openai_provider, max_retries=2, max_wait_s=5, sleep=sleep)

    events = await collect(provider.stream(hello))

    assert sleep.delays == [2.0]
    assert text_of(events) == "after the wait"
    assert len(openai_server.requests) == 2


# ---- FallbackProvider ----------------------------------------------------------------------


async def test_fallback_switches_to_second_provider_with_its_model_on_5xx(
    openai_server: FakeOpenAIServer,
    anthropic_server: FakeAnthropicServer,
    openai_provider: OpenAICompatibleProvider,
    anthropic_provider: AnthropicProvider,
    hello: ChatRequest,
) -> None:
    openai_server.push(HttpError(503, "down"))
    anthropic_server.push(Text("from the fallback"))
    provider = FallbackProvider([(openai_provider, "gpt-main"), (anthropic_provider, "claude-b")])

    events = await collect(provider.stream(hello))

    (switch,) = [event for event in events if isinstance(event, RetryScheduled)]
    assert (switch.attempt, switch.reason, switch.provider) == (1, "fallback", "anthropic")
    assert "service unavailable (503)" in switch.message  # what failed, and the cause
    assert switch.message.endswith("falling back to anthropic (claude-b)")
    assert text_of(events) == "from the fallback"
    assert openai_server.requests[-1].body["model"] == "gpt-main"
    assert anthropic_server.requests[-1].body["model"] == "claude-b"


async def test_fallback_does_not_switch_on_bad_request(
    openai_server: FakeOpenAIServer,
    anthropic_server: FakeAnthropicServer,
    openai_provider: OpenAICompatibleProvider,
    anthropic_provider: AnthropicProvider,
    hello: ChatRequest,
) -> None:
    openai_server.push(HttpError(400, "unknown parameter"))
    provider = FallbackProvider([(openai_provider, "gpt-main"), (anthropic_provider, "claude-b")])

    with pytest.raises(ProviderBadRequest):
        await collect(provider.stream(hello))

    assert anthropic_server.requests == []


async def test_fallback_does_not_switch_after_content(
    openai_server: FakeOpenAIServer,
    anthropic_server: FakeAnthropicServer,
    openai_provider: OpenAICompatibleProvider,
    anthropic_provider: AnthropicProvider,
    hello: ChatRequest,
) -> None:
    openai_server.push(StreamCut("one two three", sent_words=1))
    provider = FallbackProvider([(openai_provider, "gpt-main"), (anthropic_provider, "claude-b")])

    with pytest.raises(ProviderBadResponse):
        await collect(provider.stream(hello))

    assert anthropic_server.requests == []


async def test_fallback_raises_the_last_error_when_all_fail(hello: ChatRequest) -> None:
    first, second = ScriptedProvider("first"), ScriptedProvider("second")
    first.push(unavailable())
    second.push(ProviderRateLimited("second", "quota", retry_after=60.0))
    provider = FallbackProvider([(first, "a"), (second, "b")])

    with pytest.raises(ProviderRateLimited) as caught:
        await collect(provider.stream(hello))

    assert caught.value.provider == "second"


async def test_retry_scheduled_from_a_link_is_not_content(
    hello: ChatRequest, sleep: RecordingSleep
) -> None:
    first, second = ScriptedProvider("first"), ScriptedProvider("second")
    first.push(unavailable(), unavailable())
    second.push("rescued")
    retrying = RetryingProvider(first, max_retries=1, max_wait_s=1, sleep=sleep)
    provider = FallbackProvider([(retrying, "a"), (second, "b")])

    events = await collect(provider.stream(hello))

    reasons = [event.reason for event in events if isinstance(event, RetryScheduled)]
    assert reasons == ["provider_unavailable", "fallback"]
    assert text_of(events) == "rescued"
    assert second.requests[0].model == "b"


async def test_aclose_closes_every_inner_provider() -> None:
    first, second = ClosableScripted("first"), ClosableScripted("second")
    provider = FallbackProvider(
        [(RetryingProvider(first, max_retries=1, max_wait_s=1), "a"), (second, "b")]
    )

    await provider.aclose()

    assert first.is_closed and second.is_closed


# ---- chains built from config --------------------------------------------------------------


def test_model_without_fallbacks_is_a_retrying_provider() -> None:
    providers = {"demo": ProviderSettings(kind="scripted", max_retries=4)}

    chain = build_chat_provider(providers, ModelSettings(provider="demo", name="m"))

    assert isinstance(chain, RetryingProvider)
    assert isinstance(chain.inner, ScriptedProvider)


def test_fallback_chain_uses_each_links_model_name() -> None:
    providers = {
        "main": ProviderSettings(kind="scripted"),
        "backup": ProviderSettings(kind="scripted", replies=["from backup"]),
    }
    model = ModelSettings.model_validate(
        {"provider": "main", "name": "big", "fallbacks": [{"provider": "backup", "name": "small"}]}
    )

    chain = build_chat_provider(providers, model)

    assert isinstance(chain, FallbackProvider)
    assert [(link.name, model_name) for link, model_name in chain.chain] == [
        ("main", "big"),
        ("backup", "small"),
    ]


def test_unknown_provider_in_a_chain_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        build_chat_provider({}, ModelSettings(provider="missing", name="m"))


@pytest.mark.process
def test_importing_the_registry_does_not_import_the_sdks() -> None:
    probe = (
        "import sys, backend.providers.registry; "
        "print('openai' in sys.modules, 'anthropic' in sys.modules)"
    )

    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=30
    )

    assert result.stdout.split() == ["False", "False"]


async def test_an_answer_without_choices_is_retried_like_any_bad_answer(
    openai_server: FakeOpenAIServer,
    openai_provider: OpenAICompatibleProvider,
    hello: ChatRequest,
    sleep: RecordingSleep,
) -> None:
    openai_server.push(Shapeless({}), Text("second try"))
    provider = RetryingProvider(openai_provider, max_retries=2, max_wait_s=10, sleep=sleep)

    events = await collect(provider.stream(replace(hello, stream=False)))

    retries = [event for event in events if isinstance(event, RetryScheduled)]
    assert [r.reason for r in retries] == ["provider_bad_response"]
    assert "holds no choices" in retries[0].message
    assert text_of(events) == "second try"
