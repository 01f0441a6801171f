"""The page picks a dropped reply stream up again where it stopped (Last-Event-ID)."""

from __future__ import annotations

import pytest
from playwright.async_api import Route, expect

from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, last_reply, send, wait_for_reply

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPLY = "alpha beta gamma delta epsilon zeta"


async def test_a_reply_whose_stream_drops_is_finished_without_a_word_twice(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push(REPLY)
    page = await tally.open_page()
    resumes: list[str] = []
    page.on(
        "request",
        lambda request: (
            resumes.append(request.headers.get("last-event-id", ""))
            if "/api/chat/turns/" in request.url
            else None
        ),
    )

    async def drop_midway(route: Route) -> None:
        """The whole turn's stream, cut after its third event (turn.started, two words)."""
        response = await route.fetch()
        events = (await response.body()).split(b"\n\n")
        await route.fulfill(response=response, body=b"\n\n".join(events[:3]) + b"\n\n")

    await page.route("**/api/chat/send", drop_midway)
    await send(page, "six words, please")
    await wait_for_reply(page)
    await expect(last_reply(page).locator(".md")).to_have_text(REPLY)
    assert resumes == ["3"]
    await tally.screenshot(page, "resumed-reply")
