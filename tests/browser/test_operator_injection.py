"""Script and markup through every field the operator's console shows (issue 30; OWASP API
Top 10 and LLM Top 10: output handling), in Chromium against the real server: a tenant's name
and its persona's name, a key's label (the audit log's actor), a memory line, a bot's last
error (what its platform answered) and the tenants the usage view draws. Each view is opened;
no injected element exists, no injected script ran, and the text shows as it was written.
Bot names and tenant ids are slugs: markup there is refused before anything is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, running_tally
from tests.channels.conftest import TOKEN, bot_settings
from tests.fakes import HttpError
from tests.fakes.telegram_server import FakeTelegramServer
from tests.waiting import until

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN_KEY = "operator-secret-for-injection-tests"
OPERATOR = {"Authorization": f"Bearer {ADMIN_KEY}"}
WAIT_S = 60.0
MARKUP = (  # names and labels hold 200 characters
    "<img src=x data-injected onerror=__pwned=1>"
    "<script data-injected>__pwned=2</script>"
    "<svg data-injected onload=__pwned=3></svg><b data-injected>b</b>{{7*7}}"
)
SHORT = "<img src=x data-injected onerror=__pwned=4>"  # persona.name: 80 characters
# What a page would have made of the markup: none of it may exist, none of it may have run.
INJECTED = "[data-injected], img[src=x], script:not([src]):not([type])"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def seeded(tally: Tally, bot: dict[str, object]) -> None:
    """Markup in every free-text field a tenant's people, its admin or a platform can set."""
    client = tally.client
    made = await client.post(
        "/api/admin/tenants",
        headers=OPERATOR,
        json={"id": "acme", "name": MARKUP, "settings": {"persona": {"name": SHORT}}},
    )
    assert made.status_code == 201, made.text
    admin = await client.post(
        "/api/admin/tenants/acme/keys", headers=OPERATOR, json={"scope": "admin", "label": MARKUP}
    )
    chat = await client.post(
        "/api/admin/tenants/acme/keys",
        headers=bearer(admin.json()["key"]),  # the audit log names the admin key by its label
        json={"scope": "chat", "label": MARKUP},
    )
    assert chat.status_code == 201, chat.text
    line = await client.post(
        "/api/memory/entries", headers=bearer(chat.json()["key"]), json={"content": MARKUP}
    )
    assert line.status_code == 201, line.text
    sent = await client.post(
        "/api/chat/send", headers=bearer(chat.json()["key"]), json={"message": MARKUP}
    )
    assert sent.status_code == 200, sent.text
    refused = [
        await client.post("/api/admin/tenants", headers=OPERATOR, json={"id": "<b>x</b>"}),
        await client.patch(
            "/api/admin/tenants/acme",
            headers=OPERATOR,
            json={"settings": {"channels": {"<img src=x>": bot}}},
        ),
    ]
    assert [r.status_code for r in refused] == [422, 422], [r.text for r in refused]
    assert "a bot name is a lowercase slug" in refused[1].json()["error"]["message"]


async def until_bot_failed(tally: Tally) -> None:
    bots: list[Any] = []  # as last seen, for the failure's message

    async def failed() -> bool:
        bots[:] = (await tally.client.get("/api/health", headers=OPERATOR)).json()["channels"]
        return any(MARKUP in (bot["last_error"] or "") for bot in bots)

    await until(failed, lambda: f"the bot's error: {bots}", timeout_s=WAIT_S, poll_s=0.05)


async def open_console(tally: Tally) -> Page:
    context = await tally.new_context()
    page = await context.new_page()
    await page.goto(f"{tally.base_url}/operator/#/tenants")
    sign_in = page.get_by_test_id("sign-in")
    await sign_in.locator("input").fill(ADMIN_KEY)
    await sign_in.locator("input").press("Enter")
    await expect(sign_in).to_be_hidden()
    return page


async def nothing_injected(page: Page) -> None:
    assert await page.locator(f"#op-view :is({INJECTED})").count() == 0
    assert await page.evaluate("window.__pwned === undefined")


async def test_markup_in_every_field_the_console_shows_stays_text(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    with FakeTelegramServer() as telegram:
        telegram.add_bot(TOKEN, username="tally_test_bot")
        telegram.fail_next("getMe", HttpError(400, MARKUP))  # what the platform answered
        channels = {"tg": bot_settings(telegram)}
        async with running_tally(
            browser, tmp_path, ScriptedProvider(), auth={"mode": "keys"}, channels=channels
        ) as tally:
            await seeded(tally, channels["tg"])
            await until_bot_failed(tally)
            page = await open_console(tally)

            row = page.locator("[data-testid=tenant-row][data-tenant-id=acme]")
            await expect(row.get_by_test_id("tenant-name")).to_have_text(MARKUP)
            await row.get_by_test_id("tenant-settings").click()
            panel = page.get_by_test_id("tenant-settings-panel")
            name = panel.locator("[data-testid=setting-field][data-key='persona.name']")
            await expect(name).to_contain_text(SHORT)
            await nothing_injected(page)

            await page.goto(f"{tally.base_url}/operator/#/keys?tenant=acme")
            await expect(page.get_by_test_id("key-label").first).to_have_text(MARKUP)
            await nothing_injected(page)

            await page.goto(f"{tally.base_url}/operator/#/bots")
            bot = page.get_by_test_id("bot-row").filter(has_text="tg")
            await expect(bot.locator("[data-field=last_error]")).to_contain_text(MARKUP)
            await nothing_injected(page)

            await page.goto(f"{tally.base_url}/operator/#/usage")
            await expect(page.get_by_test_id("usage-row").first).to_be_visible()
            await nothing_injected(page)

            await page.goto(f"{tally.base_url}/operator/#/memory")
            acme = page.locator("[data-testid=memory-health-row][data-tenant=acme]")
            await acme.get_by_test_id("memory-view-toggle").click()
            await expect(page.get_by_test_id("memory-line").first).to_contain_text(MARKUP)
            await nothing_injected(page)

            await page.goto(f"{tally.base_url}/operator/#/audit")
            actors = page.get_by_test_id("audit-actor")
            await expect(actors.filter(has_text=MARKUP)).to_have_count(1)
            await nothing_injected(page)
            errors = list(tally.page_errors)

    assert errors == []
