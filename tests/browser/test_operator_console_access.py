"""The operator's console offers what the key may do: a tenant's admin key manages its own
tenant (keys, usage, memory, audit) without the operator's controls, and a refusal never
signs anyone out; the Keys view opens where keys were made last; a phone shows it all."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from tests.browser.test_operator_admin import (
    ADMIN_KEY,
    create_tenant,
    issue_key,
    keyed_tally,
    open_console,
    tenant_row,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def still_signed_in(page: Page) -> None:
    await expect(page.get_by_test_id("sign-in")).to_be_hidden()
    assert await page.evaluate("() => sessionStorage.getItem('tally.apiKey')") is not None


async def test_a_tenants_admin_key_sees_its_own_tenant_without_the_operators_controls(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        await create_tenant(tally, "acme")
        admin_key = await issue_key(tally, "acme", "acme admin", scope="admin")

        page = await open_console(tally, admin_key)
        row = tenant_row(page, "acme")
        await expect(row).to_be_visible()
        await expect(row.get_by_test_id("tenant-keys")).to_be_visible()
        for operator_only in ("tenant-settings", "tenant-toggle"):
            await expect(row.get_by_test_id(operator_only)).to_have_count(0)
        await expect(page.get_by_test_id("tenant-create")).to_have_count(0)
        await tally.screenshot(page, "tenant-admin")

        # The settings panel's own address: the operator's only, so not opened, and no sign-out.
        await page.goto(f"{tally.base_url}/operator/#/tenants?tenant=acme")
        await expect(tenant_row(page, "acme")).to_be_visible()
        await expect(page.get_by_test_id("tenant-settings-panel")).to_have_count(0)
        await still_signed_in(page)

        await row.get_by_test_id("tenant-keys").click()
        await expect(page.get_by_test_id("key-row")).to_have_count(1)
        await still_signed_in(page)


async def test_a_refusal_is_said_and_signs_nobody_out(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        await create_tenant(tally, "acme")
        admin_key = await issue_key(tally, "acme", "acme admin", scope="admin")
        page = await open_console(tally, admin_key)
        await expect(tenant_row(page, "acme")).to_be_visible()

        refused = await page.evaluate(
            """async () => {
                const { json } = await import("/api.js");
                try { await json("GET", "/api/admin/tenants/acme/settings"); }
                catch (err) { return { status: err.status, code: err.code }; }
            }"""
        )
        assert refused == {"status": 403, "code": "operator_only"}
        await page.evaluate(
            """async () => {
                const { ApiError } = await import("/api.js");
                const { opConsole } = await import("/operator/main.js");
                opConsole.fail(new ApiError(403, "operator_only", "only the operator"));
            }"""
        )
        await expect(page.locator(".toast").last).to_contain_text("operator_only")
        await still_signed_in(page)


async def test_the_keys_view_opens_on_the_tenant_whose_keys_were_made_last(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        for tenant_id in ("acme", "globex"):
            await create_tenant(tally, tenant_id)
        await issue_key(tally, "globex", "globex web")  # as `tally keys create globex` would

        page = await open_console(tally, ADMIN_KEY, "keys")
        await expect(page.get_by_test_id("keys-tenant")).to_have_value("globex")
        await expect(page.get_by_test_id("key-label")).to_have_text("globex web")


@pytest.mark.parametrize("view", ["tenants", "keys", "bots", "usage", "memory", "audit"])
async def test_the_console_fits_a_phone(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, view: str
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        await create_tenant(tally, "acme-corporation-with-a-long-name")
        await issue_key(tally, "acme-corporation-with-a-long-name", "a label that is rather long")
        context = await tally.new_context(width=380, height=760)
        page = await context.new_page()
        await page.goto(f"{tally.base_url}/operator/#/{view}")
        overlay = page.get_by_test_id("sign-in")
        await overlay.locator("input").fill(ADMIN_KEY)
        await overlay.locator("input").press("Enter")
        await expect(page.get_by_test_id(f"view-{view}")).to_be_visible()
        await expect(page.get_by_test_id(f"view-{view}").locator("h2").first).to_be_visible()
        await tally.screenshot(page, f"phone-{view}")

        # Nothing is cut off: the page does not scroll sideways, the nav and Sign out fit,
        # and a wide table scrolls in its own box.
        assert await page.evaluate("() => document.documentElement.scrollWidth") <= 380
        await expect(page.get_by_test_id("op-nav")).to_be_in_viewport()
        await expect(page.locator("#sign-out")).to_be_in_viewport()
        for link in await page.get_by_test_id("op-nav").get_by_role("link").all():
            box = await link.bounding_box()
            assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= 380
