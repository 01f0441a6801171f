"""The page with memory kept per person (`memory.scope: user`): this browser is one end user
(`web:<16 hex>`), links itself with the person's Telegram chat in either direction, and with
`memory.confirm_writes` shows the lines waiting for the person's OK, remembered or discarded
there. With one memory for the tenant, none of it is shown."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Locator, Page, expect

from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.browser.harness import Tally, keep_for_readme, running_tally, send, wait_for_reply
from tests.prompt_text import prompt_text

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

# Generous: this machine is busy, and a turn waits for the model and the server.
WAIT_MS = 60_000
TELEGRAM = "telegram:42"
USER_KEY = re.compile(r"^web:[0-9a-f]{16}$")
USED = "this link code was used already: ask for a new one"
# Polled: each call starts a read, and a later call sees its answer (a predicate that returned
# the read's promise would count as true at once).
CLIPBOARD_HOLDS = """(text) => {
  navigator.clipboard.readText().then((read) => { window.clipboardRead = read; });
  return window.clipboardRead === text;
}"""


@asynccontextmanager
async def personal_tally(
    browser: Browser, tmp_path: Path, provider: ScriptedProvider, *, confirm_writes: bool = False
) -> AsyncIterator[Tally]:
    """Tally keeping one memory per person, asking them first when `confirm_writes`."""
    memory = {
        "path": str(tmp_path / "MEMORY.md"),
        "scope": "user",
        "confirm_writes": confirm_writes,
    }
    async with running_tally(browser, tmp_path, provider, memory=memory) as tally:
        yield tally


def remember(call_id: str, fact: str) -> ScriptedToolCalls:
    """The model's turn that asks `memory_write` to keep `fact`."""
    return ScriptedToolCalls([ToolCall(id=call_id, name="memory_write", arguments={"fact": fact})])


async def page_user(page: Page) -> str:
    """The end user key the page keeps for this browser."""
    key = await page.evaluate("localStorage.getItem('tally.user')")
    assert isinstance(key, str) and USER_KEY.match(key), key
    return key


async def facts(tally: Tally, user: str) -> list[str]:
    memory = (await tally.client.get("/api/memory", params={"user": user})).json()
    return sorted(entry["content"] for entry in memory["entries"])


async def open_memory(page: Page) -> Locator:
    """The memory panel, opened from the sidebar, once its list is loaded."""
    await page.get_by_test_id("memory-button").click()
    panel = page.get_by_test_id("memory-panel")
    await expect(panel).to_be_visible()
    await expect(panel.get_by_test_id("memory-list")).not_to_contain_text("Loading")
    return panel


async def reopen_memory(page: Page) -> Locator:
    await page.keyboard.press("Escape")
    await expect(page.get_by_test_id("memory-panel")).to_be_hidden()
    return await open_memory(page)


async def test_a_proposed_line_is_kept_only_once_the_person_says_remember(
    browser: Browser, tmp_path: Path
) -> None:
    provider = ScriptedProvider(delay_s=0.01)
    provider.push(remember("c1", "Ada keeps bees"), "I will keep that once you say so.")
    provider.push(remember("c2", "Ada hates mornings"), "Noted, if you agree.")
    async with personal_tally(browser, tmp_path, provider, confirm_writes=True) as tally:
        page = await tally.open_page()
        user = await page_user(page)
        badge = page.get_by_test_id("pending-badge")
        await expect(badge).to_be_hidden()

        await send(page, "I keep bees")
        await wait_for_reply(page)
        await expect(badge).to_have_text("1", timeout=WAIT_MS)  # refreshed when the turn ends
        await send(page, "Mornings are hard")
        await wait_for_reply(page)
        await expect(badge).to_have_text("2", timeout=WAIT_MS)
        await tally.screenshot(page, "pending-badge")
        session_id = page.url.rsplit("/", 1)[-1]
        session = (await tally.client.get(f"/api/chat/sessions/{session_id}")).json()
        assert session["user"] == user  # the page created it as this browser's end user
        assert await facts(tally, user) == []  # nothing is kept before the person says so

        panel = await open_memory(page)
        pending = panel.get_by_test_id("pending-memory")
        entries = pending.get_by_test_id("pending-entry")
        await expect(entries.get_by_test_id("pending-content")).to_have_text(
            ["Ada keeps bees", "Ada hates mornings"]  # oldest first
        )
        await expect(pending).to_contain_text("Waiting for your OK")
        await expect(entries.first.get_by_test_id("pending-source")).not_to_be_empty()
        await expect(panel.get_by_test_id("memory-entry")).to_have_count(0)
        shot = tally.shots / "pending-memory.png"
        await pending.screenshot(path=shot)
        keep_for_readme(shot, "pending_memory.png")

        await entries.first.get_by_test_id("pending-remember").click()
        await expect(entries).to_have_count(1)
        await expect(panel.get_by_test_id("memory-content")).to_have_text(["Ada keeps bees"])
        await expect(badge).to_have_text("1")
        assert await facts(tally, user) == ["Ada keeps bees"]

        await entries.first.get_by_test_id("pending-discard").click()
        await expect(pending).to_be_hidden()  # nothing waits any more
        await expect(badge).to_be_hidden()
        await expect(panel.get_by_test_id("memory-content")).to_have_text(["Ada keeps bees"])
        assert await facts(tally, user) == ["Ada keeps bees"]
        waiting = await tally.client.get("/api/memory/proposals", params={"user": user})
        assert waiting.json()["proposals"] == []

        await page.reload()  # the same browser is the same end user
        await expect(page.get_by_test_id("memory-button")).to_be_visible()
        assert await page_user(page) == user
        panel = await open_memory(page)
        await expect(panel.get_by_test_id("memory-content")).to_have_text(["Ada keeps bees"])
        await tally.screenshot(page, "after-decisions")


async def test_a_code_from_the_page_links_it_with_a_telegram_chat_until_unlinked(
    browser: Browser, tmp_path: Path
) -> None:
    async with personal_tally(browser, tmp_path, ScriptedProvider()) as tally:
        page = await tally.open_page()
        user = await page_user(page)
        panel = await open_memory(page)
        links = panel.get_by_test_id("link-panel")
        await expect(links.get_by_test_id("link-status")).to_have_text("Not linked")
        await expect(links.get_by_test_id("unlink")).to_be_hidden()

        await links.get_by_test_id("link-get-code").click()
        shown = links.get_by_test_id("link-code")
        await expect(shown).to_have_text(re.compile(r"^[A-Z0-9]{4}-[A-Z0-9]{4}$"))
        code = await shown.inner_text()
        await expect(links.get_by_test_id("link-code-box")).to_contain_text(
            f"Send /link {code} to the bot in your chat app within 10 minutes."
        )
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await links.get_by_role("button", name="Copy").click()
        await page.wait_for_function(CLIPBOARD_HOLDS, arg=code, polling=100)
        await tally.screenshot(page, "link-code")

        # The person sends `/link CODE` from Telegram: the page sees it without a reload.
        redeemed = await tally.client.post(
            "/api/people/links", json={"user": TELEGRAM, "code": code}
        )
        assert redeemed.status_code == 200, redeemed.text
        assert sorted(redeemed.json()["identities"]) == sorted([TELEGRAM, user])
        await expect(links.get_by_test_id("link-identity")).to_have_text(
            [TELEGRAM], timeout=WAIT_MS
        )
        await expect(links.get_by_test_id("link-status")).to_contain_text("Linked with")
        await expect(links.get_by_test_id("link-code-box")).to_be_hidden()  # it is used

        told = await tally.client.post(
            "/api/memory/entries", params={"user": TELEGRAM}, json={"content": "Ada keeps bees"}
        )
        assert told.status_code == 201, told.text
        panel = await reopen_memory(page)
        await expect(panel.get_by_test_id("memory-content")).to_have_text(["Ada keeps bees"])
        await tally.screenshot(page, "linked")

        await links.get_by_test_id("unlink").click()
        await links.get_by_test_id("unlink-confirm").click()
        await expect(links.get_by_test_id("link-status")).to_have_text("Not linked")
        await expect(links.get_by_test_id("unlink")).to_be_hidden()
        await expect(panel.get_by_test_id("memory-entry")).to_have_count(0)  # the person's
        gone = await tally.client.get("/api/people/links", params={"user": user})
        assert gone.status_code == 404
        assert await facts(tally, TELEGRAM) == ["Ada keeps bees"]

        await page.keyboard.press("Escape")
        await page.get_by_test_id("lang-toggle").click()
        await page.get_by_test_id("memory-button").click()
        await expect(links.get_by_test_id("link-status")).to_have_text("未关联")
        await expect(links.get_by_test_id("link-get-code")).to_have_text("获取关联码")


async def test_a_code_from_a_bot_typed_into_the_page_links_it_once(
    browser: Browser, tmp_path: Path
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    async with personal_tally(browser, tmp_path, provider) as tally:
        told = await tally.client.post(
            "/api/memory/entries", params={"user": TELEGRAM}, json={"content": "Ada keeps bees"}
        )
        assert told.status_code == 201, told.text
        issued = await tally.client.post("/api/people/link-codes", json={"user": TELEGRAM})
        assert issued.status_code == 201, issued.text
        code = issued.json()["code"]
        page = await tally.open_page()
        user = await page_user(page)
        panel = await open_memory(page)
        links = panel.get_by_test_id("link-panel")
        await expect(panel.get_by_test_id("memory-entry")).to_have_count(0)

        await links.get_by_test_id("link-code-input").fill(code.lower())
        await links.get_by_test_id("link-redeem").click()
        await expect(links.get_by_test_id("link-identity")).to_have_text([TELEGRAM])
        await expect(links.get_by_test_id("link-code-input")).to_have_value("")
        # The person's memory is this browser's now: the panel reads it again at once.
        await expect(panel.get_by_test_id("memory-content")).to_have_text(["Ada keeps bees"])
        linked = await tally.client.get("/api/people/links", params={"user": user})
        assert sorted(linked.json()["identities"]) == sorted([TELEGRAM, user])
        # What the person told on Telegram is in the prompt when they ask on the page.
        await send(page, "what do I keep?")
        await wait_for_reply(page)
        assert "Ada keeps bees" in prompt_text(provider.requests[-1])

        await links.get_by_test_id("link-code-input").fill(code)
        await links.get_by_test_id("link-redeem").click()
        problem = links.get_by_test_id("link-problem")
        await expect(problem).to_contain_text(USED)
        await expect(problem.get_by_test_id("error-code")).to_have_text("link_code_used")
        await expect(links.get_by_test_id("link-identity")).to_have_text([TELEGRAM])
        await tally.screenshot(page, "code-reused")


async def test_with_one_memory_for_the_tenant_nothing_personal_is_shown(
    browser: Browser, tmp_path: Path
) -> None:
    provider = ScriptedProvider(delay_s=0.01)
    provider.push(remember("c1", "The team meets on Mondays"), "Remembered.")
    async with running_tally(browser, tmp_path, provider) as tally:
        page = await tally.open_page()
        await send(page, "We meet on Mondays")
        await wait_for_reply(page)
        panel = await open_memory(page)
        await expect(panel.get_by_test_id("memory-content")).to_have_text(
            ["The team meets on Mondays"]  # written at once: nobody is asked
        )
        await expect(panel.get_by_test_id("link-panel")).to_be_hidden()
        await expect(panel.get_by_test_id("pending-memory")).to_be_hidden()
        await expect(page.get_by_test_id("pending-badge")).to_be_hidden()
        assert await page.evaluate("localStorage.getItem('tally.user')") is None
        sessions: dict[str, Any] = (await tally.client.get("/api/chat/sessions")).json()
        assert [session["user"] for session in sessions["sessions"]] == [None]
        await tally.screenshot(page, "tenant-memory")
