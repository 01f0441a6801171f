"""Each provider's latest call outcome, as recorded around the bare adapters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from backend.domain.events import ProviderEvent, TextDelta
from backend.domain.requests import ChatRequest
from backend.errors import ProviderUnavailable
from backend.providers.base import ChatProvider
from backend.providers.outcomes import Outcome, ProviderOutcomes, RecordedProvider
from backend.providers.registry import build_chat_provider
from backend.providers.scripted import ScriptedProvider
from backend.settings import ModelSettings, ProviderSettings

AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def fixed_clock() -> datetime:
    return AT


async def drain(provider: ChatProvider, request: ChatRequest) -> None:
    async for _event in provider.stream(request):
        pass


async def test_finished_call_is_recorded_ok(hello: ChatRequest) -> None:
    outcomes = ProviderOutcomes(clock=fixed_clock)
    provider = RecordedProvider(ScriptedProvider("main", replies=["hi"]), outcomes)

    await drain(provider, hello)

    assert outcomes.latest("main") == Outcome(is_ok=True, at=AT)


async def test_failed_call_keeps_its_code_and_message(hello: ChatRequest) -> None:
    outcomes = ProviderOutcomes(clock=fixed_clock)
    scripted = ScriptedProvider("main")
    scripted.push(ProviderUnavailable("main", "connection refused", url="http://127.0.0.1:9/v1"))
    provider = RecordedProvider(scripted, outcomes)

    try:
        await drain(provider, hello)
    except ProviderUnavailable:
        pass

    assert outcomes.latest("main") == Outcome(
        is_ok=False,
        at=AT,
        error_code="provider_unavailable",
        error="main (http://127.0.0.1:9/v1): connection refused",
    )


async def test_a_later_success_replaces_the_error(hello: ChatRequest) -> None:
    outcomes = ProviderOutcomes()
    scripted = ScriptedProvider("main", replies=["back again"])
    scripted.push(ProviderUnavailable("main", "connection refused"))
    provider = RecordedProvider(scripted, outcomes)
    try:
        await drain(provider, hello)
    except ProviderUnavailable:
        pass

    await drain(provider, hello)

    latest = outcomes.latest("main")
    assert latest is not None and latest.is_ok and latest.error is None


async def test_caller_stopping_after_the_answer_began_is_ok(hello: ChatRequest) -> None:
    outcomes = ProviderOutcomes()
    provider = RecordedProvider(ScriptedProvider("main", replies=["one two three"]), outcomes)

    events = provider.stream(hello)
    await anext(events)
    await events.aclose()

    latest = outcomes.latest("main")
    assert latest is not None and latest.is_ok


class Hanging:
    """A provider whose call begins and never answers."""

    name = "main"

    def __init__(self) -> None:
        self.is_called = asyncio.Event()

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        self.is_called.set()
        await asyncio.Event().wait()
        yield TextDelta("never sent")

    async def aclose(self) -> None:
        return None


async def test_call_cancelled_before_any_answer_is_not_recorded(hello: ChatRequest) -> None:
    outcomes = ProviderOutcomes()
    hanging = Hanging()
    task = asyncio.create_task(drain(RecordedProvider(hanging, outcomes), hello))
    await hanging.is_called.wait()

    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    assert outcomes.latest("main") is None


async def test_chains_record_every_link_under_its_name(
    hello: ChatRequest, refused_port: int
) -> None:
    url = f"http://127.0.0.1:{refused_port}/v1"
    providers = {
        "main": ProviderSettings(kind="openai_compatible", base_url=url, max_retries=0),
        "backup": ProviderSettings(kind="scripted", replies=["from backup"]),
    }
    model = ModelSettings.model_validate(
        {"provider": "main", "name": "big", "fallbacks": [{"provider": "backup", "name": "small"}]}
    )
    outcomes = ProviderOutcomes()
    chain = build_chat_provider(providers, model, outcomes=outcomes)

    try:
        await drain(chain, hello)
    finally:
        await chain.aclose()

    main, backup = outcomes.latest("main"), outcomes.latest("backup")
    assert main is not None and backup is not None
    assert (main.is_ok, main.error_code) == (False, "provider_unavailable")
    assert main.error == f"main ({url}): connection refused"
    assert backup.is_ok
