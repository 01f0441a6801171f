"""The parts that light up as the server grows: the memory panel and API-key sign-in."""

from __future__ import annotations

import json

import pytest
from playwright.async_api import Request, Route, expect

from tests.browser.harness import Tally

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

ERROR_401 = json.dumps({"error": {"code": "unauthorized", "message": "an API key is needed"}})
GOOD_KEY = "tally-test-key"


async def test_memory_panel_is_hidden_when_the_server_has_no_memory_api(tally: Tally) -> None:
    context = await tally.new_context()
    await context.route(
        "**/api/memory",
        lambda route: route.fulfill(
            status=404,
            content_type="application/json",
            body=json.dumps({"error": {"code": "not_found", "message": "Not Found"}}),
        ),
    )
    page = await context.new_page()
    await page.goto(tally.base_url)
    await expect(page.get_by_test_id("empty-state")).to_be_visible()
    await expect(page.get_by_test_id("memory-button")).to_be_hidden()
    await tally.screenshot(page, "no-memory-api")


async def test_memory_panel_lists_and_deletes_entries(tally: Tally) -> None:
    if (await tally.client.get("/api/memory")).status_code == 404:
        pytest.skip("this server has no memory API yet")
    content = "2026-11-29|web|Prefers metric units\n2026-11-30|manual|Grows tomatoes\n"
    assert (await tally.client.put("/api/memory", json={"content": content})).status_code == 200
    page = await tally.open_page()

    await page.get_by_test_id("memory-button").click()
    panel = page.get_by_test_id("memory-panel")
    entries = panel.locator(".memory-entry")
    await expect(entries).to_have_count(2)
    await expect(entries.first).to_contain_text("Grows tomatoes")  # newest first
    await entries.filter(has_text="Prefers metric units").get_by_role("button").click()
    await expect(entries).to_have_count(1)
    remaining = (await tally.client.get("/api/memory")).json()["entries"]
    assert [e["content"] for e in remaining] == ["Grows tomatoes"]
    await tally.screenshot(page, "memory")


async def test_sign_in_asks_for_an_api_key_and_sends_it(tally: Tally) -> None:
    """The server answers 401 without `Authorization: Bearer <key>` (faked: not built yet)."""
    context = await tally.new_context()
    seen: list[str | None] = []

    async def require_key(route: Route, request: Request) -> None:
        header = await request.header_value("authorization")
        seen.append(header)
        if header == f"Bearer {GOOD_KEY}":
            await route.continue_()
        else:
            await route.fulfill(status=401, content_type="application/json", body=ERROR_401)

    await context.route("**/api/chat/**", require_key)
    page = await context.new_page()
    await page.goto(tally.base_url)
    sign_in = page.get_by_test_id("sign-in")
    await expect(sign_in).to_be_visible()

    await sign_in.locator("input").fill("wrong-key")
    await sign_in.locator("input").press("Enter")
    await expect(sign_in.locator(".auth-problem")).to_have_text("That key was not accepted.")
    await sign_in.locator("input").fill(GOOD_KEY)
    await sign_in.locator("input").press("Enter")
    await expect(sign_in).to_be_hidden()
    await expect(page.get_by_test_id("empty-state")).to_be_visible()
    assert seen[-1] == f"Bearer {GOOD_KEY}"
    assert await page.evaluate("() => sessionStorage.getItem('tally.apiKey')") == GOOD_KEY
    await tally.screenshot(page, "signed-in")

    await page.locator("#sign-out").click()  # forgets the key: the server asks again
    await expect(sign_in).to_be_visible()
    assert await page.evaluate("() => sessionStorage.getItem('tally.apiKey')") is None
