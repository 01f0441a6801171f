"""The browser-test harness: Debian's Chromium, driven by Playwright, against the real server.

The page is the bundled `frontend/`; the model is a `ScriptedProvider`. Each test saves a
screenshot under its `tmp_path`, so a failing run leaves a picture of what the page showed.
Importing this module skips the importing test module when Chromium or Playwright is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from backend.app import create_app
from backend.providers.base import ChatProvider
from backend.providers.scripted import ScriptedProvider
from tests.conftest import ROOT, make_settings, serve

CHROMIUM = Path("/usr/bin/chromium")

if importlib.util.find_spec("playwright") is None:
    pytest.skip(
        "browser tests need the playwright package: .venv/bin/pip install playwright",
        allow_module_level=True,
    )
if not CHROMIUM.exists():
    pytest.skip(
        "browser tests need Chromium at /usr/bin/chromium: "
        "apt-get install -y chromium fonts-wqy-microhei",
        allow_module_level=True,
    )

from playwright.async_api import (  # noqa: E402  (after the skip above)
    Browser,
    BrowserContext,
    Error,
    Locator,
    Page,
    async_playwright,
    expect,
)

# `playwright install` cannot download browsers here: drive the distribution's Chromium.
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
TIMEOUT_MS = 10_000


@dataclass
class Tally:
    """The served app, its scripted model, and pages open on it."""

    app: FastAPI
    base_url: str
    client: httpx.AsyncClient
    browser: Browser
    shots: Path
    contexts: list[BrowserContext] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    async def new_context(
        self,
        *,
        locale: str = "en-US",
        color_scheme: Literal["light", "dark"] = "light",
        width: int = 1280,
        height: int = 820,
    ) -> BrowserContext:
        """A fresh browser profile; an uncaught error in any of its pages fails the test."""
        context = await self.browser.new_context(
            locale=locale,
            color_scheme=color_scheme,
            viewport={"width": width, "height": height},
            device_scale_factor=1,
        )
        context.set_default_timeout(TIMEOUT_MS)
        context.on("page", lambda page: page.on("pageerror", self._record_error))
        self.contexts.append(context)
        return context

    async def open_page(
        self,
        path: str = "/",
        *,
        locale: str = "en-US",
        color_scheme: Literal["light", "dark"] = "light",
        width: int = 1280,
        height: int = 820,
    ) -> Page:
        """A page on `path`, once it has drawn the empty chat or a session (its messages, and
        its summary card, which stays hidden while the session has no summary)."""
        context = await self.new_context(
            locale=locale, color_scheme=color_scheme, width=width, height=height
        )
        page = await context.new_page()
        await page.goto(self.base_url + path)
        await page.wait_for_selector(
            ".empty-state, .thread .summary-card, .thread .window", state="attached"
        )
        return page

    def _record_error(self, error: Error) -> None:
        self.page_errors.append(str(error))

    async def screenshot(self, page: Page, name: str) -> Path:
        path = self.shots / f"{name}.png"
        await page.screenshot(path=path, full_page=True)
        return path


# The turn of each page's last reply when a message was last sent from it: the reply to that
# message is the first with another turn.
_LAST_TURN_BEFORE_SEND: weakref.WeakKeyDictionary[Page, str] = weakref.WeakKeyDictionary()
# The text each page sent last: its reply is the assistant message after that user message, even
# while the page redraws the thread (after a compaction) and its replies come and go.
_LAST_SENT: weakref.WeakKeyDictionary[Page, str] = weakref.WeakKeyDictionary()


async def send(page: Page, text: str) -> None:
    """Type into the message box and press Enter, as a reader would."""
    replies = page.get_by_test_id("assistant-message")
    if await replies.count():
        _LAST_TURN_BEFORE_SEND[page] = await replies.last.get_attribute("data-turn-id") or ""
    else:
        _LAST_TURN_BEFORE_SEND.pop(page, None)
    _LAST_SENT[page] = text
    box = page.get_by_test_id("input")
    await box.fill(text)
    await box.press("Enter")


def last_reply(page: Page) -> Locator:
    return page.get_by_test_id("assistant-message").last


async def wait_for_reply(page: Page, status: str = "complete") -> None:
    """Until the reply to the message sent last is shown with `status` (the previous reply,
    still last until the new one appears, does not count), and is the last reply."""
    sent = _LAST_SENT.get(page)
    if sent is not None:
        asked = page.get_by_test_id("user-message").filter(has_text=sent).last
        reply = asked.locator("xpath=following-sibling::*[@data-testid='assistant-message'][1]")
        await expect(reply).to_have_attribute("data-status", status, timeout=TIMEOUT_MS)
    previous = _LAST_TURN_BEFORE_SEND.get(page)
    if previous:
        await expect(last_reply(page)).not_to_have_attribute(
            "data-turn-id", previous, timeout=TIMEOUT_MS
        )
    await expect(last_reply(page)).to_have_attribute("data-status", status, timeout=TIMEOUT_MS)


@asynccontextmanager
async def running_tally(
    browser: Browser,
    tmp_path: Path,
    provider: ChatProvider | None,
    *,
    summarizer: ChatProvider | None = None,
    **settings_overrides: Any,
) -> AsyncIterator[Tally]:
    """Serve Tally (migrated SQLite file under `tmp_path`); `provider=None` means the demo.

    `summarizer` answers the overflow summaries (by default the chat provider does);
    `settings_overrides` are settings sections, as in `make_settings`.
    """
    settings = make_settings(
        f"sqlite+aiosqlite:///{tmp_path / 't.db'}", tmp_path, **settings_overrides
    )
    app = create_app(settings, provider=provider, summarizer_provider=summarizer)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    async with serve(app) as client:
        tally = Tally(app, str(client.base_url).rstrip("/"), client, browser, shots)
        try:
            yield tally
        finally:
            for context in tally.contexts:
                await context.close()
        assert tally.page_errors == [], "the page threw"


# One Chromium for the whole run (each test gets fresh browser contexts), so the browser tests
# share the session's event loop: each test module sets `pytestmark` to run in it.
@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
def provider() -> ScriptedProvider:
    return ScriptedProvider(delay_s=0.01)


@pytest_asyncio.fixture(loop_scope="session")
async def tally(
    browser: Browser, provider: ScriptedProvider, tmp_path: Path
) -> AsyncIterator[Tally]:
    async with running_tally(browser, tmp_path, provider) as served:
        yield served


def keep_for_readme(shot: Path, name: str) -> None:
    """Copy a screenshot to docs/<name> for the README and docs/, only when it is missing or
    TALLY_UPDATE_SCREENSHOT=1 asks, so that test runs leave the checkout as it was."""
    target = ROOT / "docs" / name
    if not target.exists() or os.environ.get("TALLY_UPDATE_SCREENSHOT") == "1":
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, target)
