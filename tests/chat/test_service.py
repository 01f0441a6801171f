"""The one entry for every turn: a platform chat maps to exactly one session, a message
delivered twice is one turn, and every entry point's messages share the checks and the
tenant's request limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.composition.build import build_services
from backend.composition.services import Services
from backend.domain.events import TurnCompleted, TurnFailed
from backend.domain.inbound import InboundMessage
from backend.domain.messages import UserInput
from backend.errors import InvalidInput, PayloadTooLarge
from backend.providers.scripted import ScriptedProvider
from backend.tenancy.quotas import RateLimited
from tests.conftest import make_settings

TENANT = "default"


@pytest.fixture
async def services(database_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    settings = make_settings(
        database_url, tmp_path, quotas={"requests_per_minute": 5}, server={"max_message_chars": 50}
    )
    async with build_services(settings, provider=ScriptedProvider(replies=["ok"])) as built:
        yield built


def message(text: str, **fields: Any) -> InboundMessage:
    fields.setdefault("channel", "telegram")
    return InboundMessage(tenant_id=TENANT, user_input=UserInput(text=text), **fields)


async def answered(services: Services, inbound: InboundMessage) -> TurnCompleted:
    end = await (await services.chat.start(inbound)).result()
    assert isinstance(end, TurnCompleted), end
    return end


async def test_a_chat_key_maps_to_exactly_one_session_never_a_prefix(services: Services) -> None:
    first = await answered(services, message("hi", external_key="bot:42"))
    again = await answered(services, message("again", external_key="bot:42"))
    longer = await answered(services, message("hi", external_key="bot:421"))
    shorter = await answered(services, message("hi", external_key="bot:4"))
    other_channel = await answered(services, message("hi", external_key="bot:42", channel="api"))

    assert again.session_id == first.session_id
    sessions = {longer.session_id, shorter.session_id, other_channel.session_id, first.session_id}
    assert len(sessions) == 4


async def test_a_platform_message_delivered_twice_is_one_turn(services: Services) -> None:
    inbound = message("only once", external_key="bot:7", message_id="1001")
    first = await answered(services, inbound)
    second = await answered(services, inbound)
    stored = await services.messages.window(
        tenant_id=TENANT, session_id=first.session_id, start_id=0, limit=50
    )
    assert second.assistant_message_id == first.assistant_message_id
    assert [m.content for m in stored] == ["only once", "ok"]


async def test_the_same_message_id_in_another_chat_is_another_message(services: Services) -> None:
    here = await answered(services, message("a", external_key="bot:1", message_id="5"))
    there = await answered(services, message("b", external_key="bot:2", message_id="5"))
    assert here.session_id != there.session_id
    assert here.user_message_id != there.user_message_id


async def test_bad_input_is_refused_before_anything_is_stored(services: Services) -> None:
    with pytest.raises(InvalidInput) as empty:
        await services.chat.start(message("   ", external_key="bot:9"))
    with pytest.raises(PayloadTooLarge):
        await services.chat.start(message("x" * 51, external_key="bot:9"))
    with pytest.raises(InvalidInput) as nul:
        await services.chat.start(message("a\x00b", external_key="bot:9"))
    assert (empty.value.code, nul.value.code) == ("empty_message", "invalid_text")
    _, total = await services.sessions.list(tenant_id=TENANT)
    assert total == 0


async def test_channel_messages_count_against_the_tenants_request_limit(
    services: Services,
) -> None:
    for n in range(5):
        await answered(services, message(f"m{n}", external_key="bot:3"))
    with pytest.raises(RateLimited) as limited:
        await services.chat.start(message("one too many", external_key="bot:3"))
    assert limited.value.retry_after > 0


async def test_a_named_session_that_does_not_exist_fails_the_turn(services: Services) -> None:
    end = await (await services.chat.start(message("hi", session_id="nope"))).result()
    assert isinstance(end, TurnFailed) and end.code == "session_not_found"


async def test_a_stop_sent_right_after_the_message_stops_its_turn(services: Services) -> None:
    """The turn may still wait for its session lock: a cancel then must not say "nothing"."""
    handle = await services.chat.start(message("write a lot", external_key="bot:9"))
    session_id = handle.request.session_id
    assert await services.chat.cancel(tenant_id=TENANT, session_id=session_id)
    end = await handle.result()
    stored = await services.messages.window(
        tenant_id=TENANT, session_id=session_id, start_id=0, limit=10
    )
    assert isinstance(end, TurnFailed) and end.code == "cancelled"
    assert [(m.role, m.content) for m in stored] == [("user", "write a lot")]
    assert not await services.chat.cancel(tenant_id=TENANT, session_id=session_id)  # ended
