"""The context window in the page: the gauge in the header and the compaction marker."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, expect

from backend.domain.messages import Usage
from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, last_reply, running_tally, send, wait_for_reply

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

# A model with a 780-token budget (980 minus 200 for the reply). A turn of these notes takes
# about a fifth of it: the third turn passes the 70 % line, the fifth the 95 % one.
BUDGET = 780
NOTES = (
    "Garden log, week twelve. The tomatoes by the south wall have set their first trusses, "
    "and the basil planted between them is finally bushing out. The courgettes are flowering, "
    "though mostly male flowers so far. Slugs took two of the lettuce seedlings overnight, so I "
    "moved the rest under the mesh cloche and put a beer trap by the path. The compost heap is "
    "warm again after I turned it on Sunday and added a layer of torn cardboard. The rain gauge "
    "says 14 mm since Tuesday. Next: stake the beans, sow a second row of carrots, and cut back "
    "the mint before it takes over the herb bed."
)
TOKENS_BEFORE_AFTER = re.compile(r"^([\d,]+) → ([\d,]+) tokens$")


@pytest_asyncio.fixture(loop_scope="session")
async def small_tally(
    browser: Browser, provider: ScriptedProvider, tmp_path: Path
) -> AsyncIterator[Tally]:
    async with running_tally(
        browser,
        tmp_path,
        provider,
        # Summaries fail, so only the emergency compaction can make room.
        summarizer=ScriptedProvider(replies=[""]),
        providers={"m": {"kind": "scripted"}},
        model={
            "provider": "m",
            "name": "gpt-4o-mini",
            "context_window": BUDGET + 200,
            "max_output_tokens": 200,
        },
        tools={"enabled": []},
    ) as served:
        yield served


async def seed_turns(tally: Tally, provider: ScriptedProvider, count: int) -> str:
    """A session with `count` turns of NOTES, sent through the API; its id."""
    session = await tally.client.post(
        "/api/chat/sessions", json={"title": "Field notes", "channel": "web"}
    )
    session_id = str(session.json()["id"])
    for _ in range(count):
        provider.push("Noted.")
        reply = await tally.client.post(
            "/api/chat/send", json={"session_id": session_id, "message": NOTES}
        )
        assert reply.status_code == 200, reply.text
    return session_id


async def gauge_colour(page: Page) -> str:
    return str(
        await page.evaluate(
            "() => getComputedStyle(document.querySelector('#context-gauge .gauge-fill')).stroke"
        )
    )


async def test_context_gauge_shows_the_last_turn_and_warns_near_the_limits(
    small_tally: Tally, provider: ScriptedProvider
) -> None:
    tally = small_tally
    session_id = await seed_turns(tally, provider, 2)
    page = await tally.open_page(f"/#/s/{session_id}")
    gauge = page.get_by_test_id("context-gauge")
    await expect(page.get_by_test_id("user-message")).to_have_count(2)
    await expect(gauge).to_be_hidden()  # no turn has completed in this page yet

    provider.push("Noted.")
    await send(page, NOTES)
    await wait_for_reply(page)
    await expect(gauge).to_be_visible()
    await expect(gauge).to_have_attribute("data-level", "warn")  # past the 70 % line
    percent = int((await gauge.locator(".gauge-label").inner_text()).rstrip("%"))
    assert 70 <= percent < 95
    title = await gauge.get_attribute("title")
    assert title is not None and f"of {BUDGET} tokens" in title and f"({percent}%)" in title
    warn_colour = await gauge_colour(page)
    await page.mouse.move(0, 0)
    await tally.screenshot(page, "context-gauge-warn")

    await page.get_by_test_id("new-chat").click()
    await expect(gauge).to_be_hidden()  # a new chat has no reading yet
    provider.push("Hello!")
    await send(page, "Hi")
    await wait_for_reply(page)
    await expect(gauge).to_have_attribute("data-level", "ok")
    assert await gauge_colour(page) != warn_colour

    await page.get_by_test_id("session-item").filter(has_text="Field notes").click()
    await expect(page.get_by_test_id("chat-title")).to_have_text("Field notes")
    await expect(gauge.locator(".gauge-label")).to_have_text(f"{percent}%")  # remembered

    levels = await page.evaluate(
        """async () => {
            const { contextLevel } = await import("/gauge.js");
            return [0, 0.69, 0.7, 0.949, 0.95, 1].map(contextLevel);
        }"""
    )
    assert levels == ["ok", "ok", "warn", "warn", "danger", "danger"]


async def test_context_gauge_says_how_much_of_the_prompt_was_cached(
    tally: Tally, provider: ScriptedProvider
) -> None:
    page = await tally.open_page("/")
    gauge = page.get_by_test_id("context-gauge")
    provider.push("Hello!")
    await send(page, "Hi")
    await wait_for_reply(page)
    await expect(gauge).to_be_visible()
    assert "cache" not in (await gauge.get_attribute("title") or "")  # none was reported

    provider.usage = Usage(prompt_tokens=2000, completion_tokens=1, cached_tokens=1234)
    provider.push("Again!")
    await send(page, "Once more")
    await wait_for_reply(page)
    cached = "1,234 of 2,000 prompt tokens were read from the model's prompt cache."
    await expect(gauge).to_have_attribute("title", re.compile(re.escape(cached) + "$"))
    await page.get_by_test_id("lang-toggle").click()
    await expect(gauge).to_have_attribute("title", re.compile("2,000 个提示 token 中有 1,234 个"))


async def test_compaction_shows_a_marker_live_and_after_reload(
    small_tally: Tally, provider: ScriptedProvider
) -> None:
    tally = small_tally
    session_id = await seed_turns(tally, provider, 4)  # the next one does not fit
    page = await tally.open_page(f"/#/s/{session_id}")
    await expect(page.get_by_test_id("user-message")).to_have_count(4)
    await expect(page.get_by_test_id("compaction-marker")).to_have_count(0)

    provider.push("Noted, with the oldest notes left out.")
    await send(page, NOTES)
    await wait_for_reply(page)
    marker = last_reply(page).get_by_test_id("compaction-marker")
    await expect(marker).to_be_visible()
    await expect(marker).to_contain_text("Earlier messages were compacted to fit the context")
    counts = TOKENS_BEFORE_AFTER.match(
        await marker.get_by_test_id("compaction-tokens").inner_text()
    )
    assert counts is not None
    before, after = (int(count.replace(",", "")) for count in counts.groups())
    assert before > BUDGET * 0.95 >= after
    assert "older messages were left out" in (await marker.get_attribute("title") or "")
    await expect(last_reply(page).locator(".md")).to_have_text(
        "Noted, with the oldest notes left out."
    )
    await expect(page.get_by_test_id("compaction-marker")).to_have_count(1)
    await page.mouse.move(0, 0)
    await tally.screenshot(page, "compaction-live")

    stored = (await tally.client.get(f"/api/chat/sessions/{session_id}/messages")).json()
    assert stored["messages"][-1]["compacted"] is True
    assert stored["messages"][-1]["content"] == "Noted, with the oldest notes left out."
    await page.reload()  # a stored reply flagged compacted shows the same marker
    await expect(last_reply(page).get_by_test_id("compaction-marker")).to_be_visible()
    await expect(page.get_by_test_id("compaction-marker")).to_have_count(1)
    await expect(last_reply(page).get_by_test_id("compaction-tokens")).to_have_count(0)
    await expect(last_reply(page).locator(".md")).to_have_text(
        "Noted, with the oldest notes left out."
    )
    assert "Earlier messages were compacted to fit the model" not in await page.inner_text("main")

    phone = await tally.open_page(f"/#/s/{session_id}", color_scheme="dark", width=380, height=760)
    await expect(phone.get_by_test_id("compaction-marker")).to_be_in_viewport()
    scroll_width = await phone.evaluate("() => document.documentElement.scrollWidth")
    assert scroll_width <= 380
    await tally.screenshot(phone, "compaction-phone-dark")
