"""A failed turn stays failed on the page: after a reload it shows the error it showed live,
with its code and cause, and Retry still resumes the same turn."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, last_reply, send, wait_for_reply

pytestmark = pytest.mark.asyncio(loop_scope="session")

CAUSE = ("acme (http://127.0.0.1:9/v1)", "connection refused")


async def test_after_a_reload_the_error_and_retry_are_still_there(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push(ProviderUnavailable(*CAUSE), "Second time lucky.")
    page = await tally.open_page()
    await send(page, "Hello?")
    await expect(page.get_by_test_id("turn-error")).to_be_visible()

    await page.reload()
    error = page.get_by_test_id("turn-error")
    await expect(error.get_by_test_id("error-code")).to_have_text("provider_unavailable")
    await expect(error).to_contain_text("acme (http://127.0.0.1:9/v1): connection refused")
    await expect(page.get_by_test_id("user-message").locator(".bubble")).to_have_text("Hello?")
    await tally.screenshot(page, "failed-after-reload")

    await error.get_by_test_id("retry").click()
    await wait_for_reply(page)
    await expect(last_reply(page)).to_contain_text("Second time lucky.")
    await expect(page.get_by_test_id("turn-error")).to_have_count(0)
    await page.reload()  # answered now: no error any more, one message each
    await expect(last_reply(page)).to_contain_text("Second time lucky.")
    await expect(page.get_by_test_id("user-message")).to_have_count(1)
    await expect(page.get_by_test_id("turn-error")).to_have_count(0)
    session_id = page.url.rsplit("/", 1)[-1]
    stored = (await tally.client.get(f"/api/chat/sessions/{session_id}/messages")).json()
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"]


async def test_an_older_failed_turn_shows_its_error_without_retry(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push(ProviderUnavailable(*CAUSE), "Answered.")
    page = await tally.open_page()
    await send(page, "First")
    await expect(page.get_by_test_id("turn-error")).to_be_visible()
    await send(page, "Second")
    await wait_for_reply(page)

    await page.reload()
    error = page.get_by_test_id("turn-error")
    await expect(error.get_by_test_id("error-code")).to_have_text("provider_unavailable")
    await expect(last_reply(page)).to_contain_text("Answered.")
    # Newer turns were answered since: resuming it would answer out of context.
    await expect(error.get_by_test_id("retry")).to_have_count(0)
