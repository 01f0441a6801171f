"""The demo, as a newcomer sees it with no key: within seven turns the page shows a memory line
with its provenance, the session summary and "show earlier messages", and the demo's reply
recalls what left the window. The real demo provider and summarizer answer (no fakes).

This test also takes the README's picture: `TALLY_SCREENSHOT_TO=docs/screenshot.png .venv/bin/
pytest tests/browser/test_demo_page.py` writes it there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.browser.harness import last_reply, running_tally, send, wait_for_reply

pytestmark = pytest.mark.asyncio(loop_scope="session")

# The shipped config's provider rows, with no key in the environment: the demo answers.
SHIPPED_PROVIDER = {"openai": {"kind": "openai_compatible", "api_key_env": "OPENAI_API_KEY"}}
TURNS = [
    "Hi! My name is Ada Lovelace.",
    "I live in Lisbon and I keep bees.",
    "Remember that my sister's birthday is on 12 May.",
    "What is a good book about engines?",
    "And one about looms?",  # the window (8 messages) overflows: turns 1-3 leave it
]


async def test_the_demo_shows_the_rolling_window_and_memory_working(
    browser: Browser, tmp_path: Path
) -> None:
    async with running_tally(
        browser,
        tmp_path,
        provider=None,
        providers=SHIPPED_PROVIDER,
        model={"provider": "openai", "name": "gpt-4o-mini"},
    ) as tally:
        page = await tally.open_page(width=1600, height=1000)  # the thread beside the panel
        await expect(page.get_by_test_id("demo-banner")).to_contain_text("OPENAI_API_KEY")
        for text in TURNS:
            await send(page, text)
            await wait_for_reply(page)
        await tally.app.state.services.runtimes.wait_idle()  # the demo summarizer has run
        await send(page, "What do you remember about me?")
        await wait_for_reply(page)

        await expect(last_reply(page)).to_contain_text("From memory I recall")
        await expect(last_reply(page)).to_contain_text("Ada Lovelace")
        await expect(page.get_by_test_id("summary-text")).to_contain_text("My name is Ada")
        await expect(page.get_by_test_id("show-earlier")).to_be_visible()
        await page.get_by_test_id("memory-button").click()
        entry = page.get_by_test_id("memory-entry")
        await expect(entry).to_have_count(1)
        await expect(entry.get_by_test_id("memory-source")).to_have_text("auto-overflow")
        for fact in ("Ada Lovelace", "Lisbon", "12 May"):
            await expect(entry.get_by_test_id("memory-content")).to_contain_text(fact)
        await expect(entry.get_by_test_id("memory-provenance")).to_contain_text("messages #1–#6")
        await page.get_by_test_id("summary-text").scroll_into_view_if_needed()
        await page.mouse.move(0, 0)
        shot = await tally.screenshot(page, "demo-memory")
    if target := os.environ.get("TALLY_SCREENSHOT_TO"):
        shutil.copy(shot, target)
