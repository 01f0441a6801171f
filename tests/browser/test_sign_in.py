"""Signing in with an API key against the real server in `auth.mode: keys`."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import last_reply, running_tally, send, wait_for_reply

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN_KEY = "operator-secret-for-browser-tests"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_sign_in_with_a_real_key_chats_and_signs_out(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(delay_s=0.01)
    async with running_tally(browser, tmp_path, provider, auth={"mode": "keys"}) as tally:
        created = await tally.client.post(
            "/api/admin/tenants", json={"id": "acme"}, headers=bearer(ADMIN_KEY)
        )
        assert created.status_code == 201, created.text
        issued = await tally.client.post(
            "/api/admin/tenants/acme/keys", json={"scope": "chat"}, headers=bearer(ADMIN_KEY)
        )
        key = issued.json()["key"]
        assert key.startswith("tly_")
        context = await tally.new_context()
        page = await context.new_page()
        await page.goto(tally.base_url)
        sign_in = page.get_by_test_id("sign-in")
        key_box = sign_in.locator("input")
        await expect(sign_in).to_be_visible()  # the server answered 401 without a key

        await key_box.fill(key[:-2] + "xx")
        await key_box.press("Enter")
        await expect(sign_in.locator(".auth-problem")).to_have_text("That key was not accepted.")
        await key_box.fill(ADMIN_KEY)  # the operator's key has no tenant to chat in
        await key_box.press("Enter")
        await expect(sign_in.locator(".auth-problem")).to_contain_text("the operator key")
        await tally.screenshot(page, "sign-in-refused")

        await key_box.fill(key)
        await key_box.press("Enter")
        await expect(sign_in).to_be_hidden()
        await expect(page.get_by_test_id("empty-state")).to_be_visible()
        provider.push("Hello from Acme's Tally.")
        await send(page, "Hello?")
        await wait_for_reply(page)
        await expect(last_reply(page)).to_contain_text("Hello from Acme's Tally.")
        listed = await tally.client.get("/api/chat/sessions", headers=bearer(key))
        assert [s["title"] for s in listed.json()["sessions"]] == ["Hello?"]  # acme's chat
        stored = await page.evaluate(
            """() => ({
                session: sessionStorage.getItem("tally.apiKey"),
                local: JSON.stringify(localStorage),
                cookies: document.cookie,
            })"""
        )
        assert stored["session"] == key
        assert key not in stored["local"] and stored["cookies"] == ""
        await tally.screenshot(page, "signed-in")

        # Sign-out forgets the key and reloads; the old page may show the sign-in too (a
        # request of its in flight answered 401), so wait for the reload itself first.
        async with page.expect_navigation():
            await page.locator("#sign-out").click()  # forgets the key: the server asks again
        await expect(sign_in).to_be_visible()
        await expect(sign_in.locator(".auth-problem")).to_be_hidden()
        assert await page.evaluate("() => sessionStorage.getItem('tally.apiKey')") is None
        await expect(page.get_by_test_id("session-item")).to_have_count(0)


async def test_a_disabled_tenants_key_is_told_so(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disabled tenant's key is refused with 403 `tenant_disabled`: the page says so (not
    that the key is wrong), and the key works again once the tenant is enabled."""
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(delay_s=0.01)
    async with running_tally(browser, tmp_path, provider, auth={"mode": "keys"}) as tally:
        operator = bearer(ADMIN_KEY)
        await tally.client.post("/api/admin/tenants", json={"id": "acme"}, headers=operator)
        issued = await tally.client.post(
            "/api/admin/tenants/acme/keys", json={"scope": "chat"}, headers=operator
        )
        key = issued.json()["key"]
        disabled = await tally.client.patch(
            "/api/admin/tenants/acme", json={"disabled": True}, headers=operator
        )
        assert disabled.status_code == 200, disabled.text
        page = await (await tally.new_context()).new_page()
        await page.goto(tally.base_url)
        sign_in = page.get_by_test_id("sign-in")
        await sign_in.locator("input").fill(key)
        await sign_in.locator("input").press("Enter")
        await expect(sign_in.locator(".auth-problem")).to_have_text(
            "This key's tenant is disabled. Ask its operator to enable it."
        )
        await tally.screenshot(page, "tenant-disabled")

        await tally.client.patch(
            "/api/admin/tenants/acme", json={"disabled": False}, headers=operator
        )
        await sign_in.locator("input").fill(key)
        await sign_in.locator("input").press("Enter")
        await expect(sign_in).to_be_hidden()
        await expect(page.get_by_test_id("empty-state")).to_be_visible()


async def test_replies_carry_the_tenants_persona_name(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(replies=["Hello from Acme."])
    async with running_tally(browser, tmp_path, provider, auth={"mode": "keys"}) as tally:
        settings = {"persona": {"name": "Acme Bot"}}
        created = await tally.client.post(
            "/api/admin/tenants",
            json={"id": "acme", "settings": settings},
            headers=bearer(ADMIN_KEY),
        )
        assert created.status_code == 201, created.text
        issued = await tally.client.post(
            "/api/admin/tenants/acme/keys", json={"scope": "chat"}, headers=bearer(ADMIN_KEY)
        )
        page = await (await tally.new_context()).new_page()
        await page.goto(tally.base_url)
        await page.get_by_test_id("sign-in").locator("input").fill(issued.json()["key"])
        await page.get_by_test_id("sign-in").locator("input").press("Enter")
        await send(page, "Who are you?")
        await wait_for_reply(page)
        await expect(last_reply(page).get_by_test_id("assistant-name")).to_have_text("Acme Bot")
        await expect(last_reply(page).locator(".avatar")).to_have_text("A")
        await page.reload()  # stored replies too
        await expect(last_reply(page).get_by_test_id("assistant-name")).to_have_text("Acme Bot")
        await tally.screenshot(page, "persona-name")
