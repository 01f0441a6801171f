"""The operator's console (`/operator/`): its Tenants, Keys and Audit log views in Chromium,
against the real server in `auth.mode: keys`. Tenants are created, disabled and configured in
the page; a key issued there is shown once and works over HTTP until revoked there; what the
page does is in the audit log, which never holds a secret; a chat key sees no tenant data."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from playwright.async_api import Browser, Locator, Page, expect

from backend.domain.requests import ChatRequest
from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, keep_for_readme, running_tally
from tests.fakes.summarizer import EchoSummarizer
from tests.waiting import until

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN_KEY = "operator-secret-for-console-tests"
WINDOW = "persona.max_history_messages"
FILE_WINDOW = 50  # what the test's config.yaml says
DEADLINE_S = 60
# Polled: each call starts a read, and a later call sees its answer.
CLIPBOARD_HOLDS = """(text) => {
  navigator.clipboard.readText().then((read) => { window.clipboardRead = read; });
  return window.clipboardRead === text;
}"""


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


OPERATOR = bearer(ADMIN_KEY)


@asynccontextmanager
async def keyed_tally(
    browser: Browser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: ScriptedProvider | None = None,
    summarizer: EchoSummarizer | None = None,
) -> AsyncIterator[Tally]:
    """Tally with API keys, the operator's key, and a window set in config.yaml."""
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    async with running_tally(
        browser,
        tmp_path,
        provider or ScriptedProvider(),
        summarizer=summarizer,
        auth={"mode": "keys"},
        persona={"max_history_messages": FILE_WINDOW},
    ) as tally:
        yield tally


async def open_console(
    tally: Tally,
    key: str,
    view: str = "tenants",
    *,
    color_scheme: Literal["light", "dark"] = "light",
    locale: str = "en-US",
) -> Page:
    """The console on `view`, signed in with `key` as the operator would: the first request
    without a key is refused, and the page asks for one."""
    context = await tally.new_context(color_scheme=color_scheme, locale=locale)
    page = await context.new_page()
    await page.goto(f"{tally.base_url}/operator/#/{view}")
    await sign_in(page, key)
    return page


async def sign_in(page: Page, key: str) -> None:
    overlay = page.get_by_test_id("sign-in")
    await expect(overlay).to_be_visible()
    await overlay.locator("input").fill(key)
    await overlay.locator("input").press("Enter")


async def create_tenant(tally: Tally, tenant_id: str) -> None:
    made = await tally.client.post("/api/admin/tenants", headers=OPERATOR, json={"id": tenant_id})
    assert made.status_code == 201, made.text


async def issue_key(tally: Tally, tenant_id: str, label: str, scope: str = "chat") -> str:
    issued = await tally.client.post(
        f"/api/admin/tenants/{tenant_id}/keys",
        headers=OPERATOR,
        json={"scope": scope, "label": label},
    )
    assert issued.status_code == 201, issued.text
    key: str = issued.json()["key"]
    return key


async def audit(tally: Tally, **params: Any) -> list[dict[str, Any]]:
    listed = await tally.client.get("/api/admin/audit", headers=OPERATOR, params=params)
    assert listed.status_code == 200, listed.text
    entries: list[dict[str, Any]] = listed.json()["entries"]
    return entries


def tenant_row(page: Page, tenant_id: str) -> Locator:
    return page.locator(f"[data-testid=tenant-row][data-tenant-id='{tenant_id}']")


def setting(page: Page, key: str) -> Locator:
    panel = page.get_by_test_id("tenant-settings-panel")
    return panel.locator(f"[data-testid=setting-field][data-key='{key}']")


async def open_settings(page: Page, tenant_id: str) -> Locator:
    await tenant_row(page, tenant_id).get_by_test_id("tenant-settings").click()
    panel = page.get_by_test_id("tenant-settings-panel")
    await expect(panel).to_have_attribute("data-tenant-id", tenant_id)
    return panel


async def go_to(page: Page, view_name: str) -> Locator:
    """Follow the header's link to a view; the view once it is drawn."""
    await page.get_by_test_id("op-nav").get_by_role("link", name=view_name, exact=True).click()
    return page.get_by_test_id("op-view")


async def test_a_tenant_created_in_the_console_is_listed_disabled_and_audited(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        page = await open_console(tally, ADMIN_KEY)
        await expect(page.get_by_test_id("tenant-row")).to_have_count(1)  # `default`, always

        await page.get_by_test_id("tenant-id-input").fill("acme")
        await page.get_by_test_id("tenant-name-input").fill("Acme Corp")
        await page.get_by_test_id("tenant-create").click()
        row = tenant_row(page, "acme")
        await expect(row.get_by_test_id("tenant-name")).to_have_text("Acme Corp")
        await expect(row.get_by_test_id("tenant-status")).to_have_text("Active")
        await expect(page.get_by_test_id("tenant-create-error")).to_be_hidden()

        # The server's refusals appear by the form, in its words; nothing is created.
        problem = page.get_by_test_id("tenant-create-error")
        await page.get_by_test_id("tenant-id-input").fill("acme")
        await page.get_by_test_id("tenant-create").click()
        await expect(problem).to_contain_text("acme")  # 409: it exists
        await page.get_by_test_id("tenant-id-input").fill("Not A Slug!")
        await page.get_by_test_id("tenant-create").click()
        await expect(problem).to_contain_text("lowercase")  # 400 invalid_tenant_id
        await expect(page.get_by_test_id("tenant-row")).to_have_count(2)
        listed = await tally.client.get("/api/admin/tenants", headers=OPERATOR)
        assert sorted(t["id"] for t in listed.json()["tenants"]) == ["acme", "default"]

        # Disabling asks first; a cancelled question changes nothing.
        await row.get_by_test_id("tenant-toggle").click()
        await expect(row).to_contain_text("Disable acme?")
        await row.get_by_test_id("tenant-toggle-confirm-cancel").click()
        await expect(row.get_by_test_id("tenant-toggle-confirm")).to_have_count(0)
        await row.get_by_test_id("tenant-toggle").click()
        await row.get_by_test_id("tenant-toggle-confirm").click()
        await expect(row.get_by_test_id("tenant-status")).to_have_text("Disabled")
        listed = await tally.client.get("/api/admin/tenants", headers=OPERATOR)
        (acme,) = [t for t in listed.json()["tenants"] if t["id"] == "acme"]
        assert acme["disabled_at"] is not None
        await row.get_by_test_id("tenant-toggle").click()
        await row.get_by_test_id("tenant-toggle-confirm").click()
        await expect(row.get_by_test_id("tenant-status")).to_have_text("Active")

        view = await go_to(page, "Audit log")
        rows = view.get_by_test_id("audit-row")
        await expect(rows.get_by_test_id("audit-action")).to_have_text(
            ["tenant.enable", "tenant.disable", "tenant.create"]  # newest first
        )
        await expect(rows.get_by_test_id("audit-actor")).to_have_text(["operator"] * 3)
        await expect(rows.get_by_test_id("audit-tenant-id")).to_have_text(["acme"] * 3)
        await tally.screenshot(page, "audit")

        # Another tenant's 55 keys: the newest 50 first, then "Older" the rest, none twice.
        await create_tenant(tally, "globex")
        for number in range(55):
            await issue_key(tally, "globex", f"bulk {number}")
        await page.reload()
        await expect(rows).to_have_count(50)
        await view.get_by_test_id("audit-older").click()
        await expect(rows).to_have_count(59)
        await expect(view.get_by_test_id("audit-older")).to_be_hidden()
        shown = [
            int(i or 0) for i in await rows.evaluate_all("rs => rs.map(r => r.dataset.entryId)")
        ]
        assert shown == sorted(shown, reverse=True) and len(set(shown)) == 59
        assert shown == [entry["id"] for entry in await audit(tally, limit=100)]

        await view.get_by_test_id("audit-tenant").select_option("acme")
        await expect(rows).to_have_count(3)
        await expect(rows.get_by_test_id("audit-tenant-id")).to_have_text(["acme"] * 3)
        assert page.url.endswith("#/audit?tenant=acme")


async def test_a_key_issued_in_the_console_is_shown_once_and_works_until_revoked_there(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        await create_tenant(tally, "acme")
        page = await open_console(tally, ADMIN_KEY, "keys?tenant=acme")
        view = page.get_by_test_id("op-view")
        await expect(view.get_by_test_id("keys-tenant")).to_have_value("acme")
        await expect(view.get_by_test_id("key-table")).to_contain_text("No keys yet.")

        await view.get_by_test_id("key-label-input").fill("web app")
        await view.get_by_test_id("key-scope").select_option("chat")
        await view.get_by_test_id("key-issue").click()
        box = view.get_by_test_id("key-secret-box")
        await expect(box).to_contain_text("shown only this once")
        secret = await box.get_by_test_id("key-secret").inner_text()
        assert secret.startswith("tly_")
        row = view.get_by_test_id("key-row")
        await expect(row.get_by_test_id("key-label")).to_have_text(["web app"])
        prefix = (await row.get_by_test_id("key-prefix").inner_text()).rstrip("…")  # tly_…_
        assert secret.startswith(prefix) and len(prefix) < len(secret)
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await box.get_by_role("button", name="Copy").click()
        await page.wait_for_function(CLIPBOARD_HOLDS, arg=secret, polling=100)
        await tally.screenshot(page, "key-secret")

        session = await tally.client.post(
            "/api/chat/sessions", headers=bearer(secret), json={"title": "From the console key"}
        )
        assert session.status_code in (200, 201), session.text

        await box.get_by_test_id("key-secret-dismiss").click()
        await expect(box).to_have_count(0)
        await assert_nowhere(page, secret)

        await row.get_by_test_id("key-revoke").click()
        await expect(row).to_contain_text(f"Revoke {prefix}…?")
        await row.get_by_test_id("key-revoke-confirm").click()
        await expect(row.get_by_test_id("key-revoked")).not_to_have_text("—")
        await expect(row.get_by_test_id("key-revoke")).to_have_count(0)
        refused = await tally.client.post(
            "/api/chat/sessions", headers=bearer(secret), json={"title": "Too late"}
        )
        assert refused.status_code == 401, refused.text

        view = await go_to(page, "Audit log")
        rows = view.get_by_test_id("audit-row")
        await expect(rows.get_by_test_id("audit-action")).to_have_text(
            ["key.revoke", "key.create", "tenant.create"]
        )
        key_id = await row_key_id(tally, "acme")
        await expect(rows.get_by_test_id("audit-target")).to_have_text([key_id, key_id, ""])
        await expect(rows.get_by_test_id("audit-actor")).to_have_text(["operator"] * 3)

        entries = await tally.client.get("/api/admin/audit", headers=OPERATOR)
        keys = await tally.client.get("/api/admin/tenants/acme/keys", headers=OPERATOR)
        assert secret not in entries.text and secret not in keys.text
        await assert_nowhere(page, secret)


async def row_key_id(tally: Tally, tenant_id: str) -> str:
    keys = await tally.client.get(f"/api/admin/tenants/{tenant_id}/keys", headers=OPERATOR)
    (key,) = keys.json()["keys"]
    key_id: str = key["id"]
    return key_id


async def assert_nowhere(page: Page, secret: str) -> None:
    """Not in the page's markup, its text, its storage or its address."""
    held = await page.evaluate(
        """() => [
            document.documentElement.outerHTML,
            document.body.innerText,
            JSON.stringify(sessionStorage),
            JSON.stringify(localStorage),
            location.href,
        ]"""
    )
    assert not [place for place in held if secret in place]


async def test_the_window_changed_in_the_console_is_the_next_turns_window(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider()
    summarizer = EchoSummarizer()
    async with keyed_tally(browser, tmp_path, monkeypatch, provider, summarizer) as tally:
        await create_tenant(tally, "acme")
        key = await issue_key(tally, "acme", "turns")
        session_id = ""
        for number in range(1, 5):  # four turns: eight stored messages, well inside 50
            session_id = await turn(tally, key, session_id, f"note {number}")
        assert history_of(request_for(provider, "note 4")) == 6
        assert "note 1" in texts_of(request_for(provider, "note 4"))

        page = await open_console(tally, ADMIN_KEY)
        await open_settings(page, "acme")
        window = setting(page, WINDOW)
        await expect(window.get_by_test_id("setting-value")).to_have_text(str(FILE_WINDOW))
        await expect(window.get_by_test_id("setting-origin")).to_have_text("config.yaml")
        await expect(window.get_by_test_id("setting-reset")).to_have_count(0)

        # A refused value stays by its field, and nothing changes.
        await window.get_by_test_id("setting-override").click()
        await window.get_by_test_id("setting-input").fill("0")
        await window.get_by_test_id("setting-save").click()
        await expect(window.get_by_test_id("setting-error")).to_contain_text(WINDOW)
        await tally.screenshot(page, "setting-refused")
        assert await window_field(tally, "acme") == (FILE_WINDOW, "file")
        assert not [e for e in await audit(tally) if e["action"] == "tenant.settings"]

        await window.get_by_test_id("setting-input").fill("4")
        await window.get_by_test_id("setting-save").click()
        await expect(window.get_by_test_id("setting-value")).to_have_text("4")
        await expect(window.get_by_test_id("setting-origin")).to_have_text("set here")
        await expect(window).to_contain_text(f"config.yaml: {FILE_WINDOW}")
        assert await window_field(tally, "acme") == (4, "api")

        # The next turn carries four stored messages, and the window overflows into a summary.
        await turn(tally, key, session_id, "note 5")
        assert history_of(request_for(provider, "note 5")) == 4
        assert "note 1" not in texts_of(request_for(provider, "note 5"))
        summary = await summary_once_written(tally, key, session_id)
        assert summary.startswith("The user sent")

        await window.get_by_test_id("setting-reset").click()
        await expect(window.get_by_test_id("setting-value")).to_have_text(str(FILE_WINDOW))
        await expect(window.get_by_test_id("setting-origin")).to_have_text("config.yaml")
        assert await window_field(tally, "acme") == (FILE_WINDOW, "file")
        changes = [e["detail"] for e in await audit(tally) if e["action"] == "tenant.settings"]
        assert changes == [{"set": [], "reset": [WINDOW]}, {"set": [WINDOW], "reset": []}]


async def turn(tally: Tally, key: str, session_id: str, text: str) -> str:
    """One JSON turn as the tenant's client sends it; the session's id."""
    body: dict[str, Any] = {"message": text}
    if session_id:
        body["session_id"] = session_id
    sent = await tally.client.post("/api/chat/send", headers=bearer(key), json=body)
    assert sent.status_code == 200, sent.text
    found: str = sent.json()["session_id"]
    return found


def request_for(provider: ScriptedProvider, text: str) -> ChatRequest:
    (request,) = [r for r in provider.requests if r.messages[-1].content == text]
    return request


def history_of(request: ChatRequest) -> int:
    """How many stored messages the request carried before the turn's own."""
    return len(request.messages) - 1


def texts_of(request: ChatRequest) -> str:
    return "\n".join(message.content for message in request.messages)


async def window_field(tally: Tally, tenant_id: str) -> tuple[Any, str]:
    read = await tally.client.get(f"/api/admin/tenants/{tenant_id}/settings", headers=OPERATOR)
    assert read.status_code == 200, read.text
    (field,) = [f for f in read.json()["fields"] if f["key"] == WINDOW]
    return field["value"], field["origin"]


async def summary_once_written(tally: Tally, key: str, session_id: str) -> str:
    """The session's summary, once the overflow has written one."""

    async def summary() -> str:
        read = await tally.client.get(f"/api/chat/sessions/{session_id}", headers=bearer(key))
        return str(read.json()["summary"])

    return await until(summary, "the session's summary", timeout_s=DEADLINE_S, poll_s=0.05)


async def test_a_chat_key_is_asked_for_an_admin_key_and_sees_no_tenant_data(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        await create_tenant(tally, "acme")
        await issue_key(tally, "acme", "secret label")
        chat_key = await issue_key(tally, "acme", "web app")
        refused = await tally.client.get("/api/admin/tenants", headers=bearer(chat_key))
        assert refused.status_code == 403, refused.text

        for view in ("tenants", "keys?tenant=acme", "audit?tenant=acme"):
            page = await open_console(tally, chat_key, view)  # a fresh tab each time
            overlay = page.get_by_test_id("sign-in")
            await expect(overlay.locator(".auth-problem")).to_have_text(
                "That key cannot manage tenants. Sign in with an admin key."
            )
            await expect(overlay).to_be_visible()
            shown = page.get_by_test_id("op-view")
            for testid in ("tenant-row", "key-row", "audit-row"):
                await expect(shown.get_by_test_id(testid)).to_have_count(0)
            text = await shown.inner_text()
            assert "secret label" not in text and "web app" not in text
            assert await page.evaluate("() => sessionStorage.getItem('tally.apiKey')") is None
        await tally.screenshot(page, "chat-key-refused")


async def test_the_tenants_view_with_settings_open_in_both_languages_and_themes(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyed_tally(browser, tmp_path, monkeypatch) as tally:
        for tenant_id, name in (("acme", "Acme Corp"), ("globex", "Globex"), ("initech", "")):
            made = await tally.client.post(
                "/api/admin/tenants", headers=OPERATOR, json={"id": tenant_id, "name": name}
            )
            assert made.status_code == 201, made.text
        patched = await tally.client.patch(
            "/api/admin/tenants/acme/settings",
            headers=OPERATOR,
            json={"values": {"persona.name": "Ada", "quotas.requests_per_minute": 30}},
        )
        assert patched.status_code == 200, patched.text
        disabled = await tally.client.patch(
            "/api/admin/tenants/initech", headers=OPERATOR, json={"disabled": True}
        )
        assert disabled.status_code == 200, disabled.text

        page = await open_console(tally, ADMIN_KEY)
        panel = await open_settings(page, "acme")
        fields = panel.get_by_test_id("setting-field")
        await expect(fields).to_have_count(9)
        await expect(setting(page, "persona.name").get_by_test_id("setting-value")).to_have_text(
            "Ada"
        )
        origins = await fields.evaluate_all(
            "rows => Object.fromEntries(rows.map(r => [r.dataset.key, "
            "r.querySelector('[data-testid=setting-origin]').dataset.origin]))"
        )
        assert origins["persona.name"] == "api" and origins[WINDOW] == "file"
        assert origins["persona.language"] == "default"
        await expect(tenant_row(page, "initech").get_by_test_id("tenant-status")).to_have_text(
            "Disabled"
        )
        shot = tally.shots / "operator-tenants.png"
        await page.screenshot(path=shot, full_page=True)
        keep_for_readme(shot, "operator_tenants.png")

        dark = await open_console(
            tally, ADMIN_KEY, "tenants?tenant=acme", color_scheme="dark", locale="zh-CN"
        )
        panel = dark.get_by_test_id("tenant-settings-panel")
        await expect(panel).to_contain_text("acme 的设置")
        await expect(setting(dark, WINDOW).get_by_test_id("setting-origin")).to_have_text(
            "config.yaml"
        )
        await expect(setting(dark, "persona.name").get_by_test_id("setting-origin")).to_have_text(
            "在此设置"
        )
        await expect(dark.get_by_test_id("tenant-create")).to_have_text("创建租户")
        background = await panel.evaluate("el => getComputedStyle(el).backgroundColor")
        assert re.fullmatch(r"rgb\((\d+), (\d+), (\d+)\)", background), background
        assert sum(map(int, re.findall(r"\d+", background))) < 3 * 80  # a dark card
        await tally.screenshot(dark, "operator-tenants-dark-zh")
