"""The operator's console, views Usage, Bots and Memory, against the real server in
`auth.mode: keys` signed in with the operator's key: the usage chart, bars and table hold the
numbers `GET /api/admin/usage` gives (a day without usage is zero) and the CSV the page saves
holds its rows; a Telegram bot (the fake Bot API) is restarted from the page and connected
again; each tenant's memory health, its lines, and an export followed to its end and saved."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Download, Locator, Page, expect

from backend.domain.messages import Usage
from backend.providers.scripted import ScriptedProvider
from backend.storage.usage import UsageDay, add_usage
from tests.browser.harness import Tally, keep_for_readme, running_tally
from tests.channels.conftest import TOKEN, bot_settings
from tests.fakes.telegram_server import FakeTelegramServer
from tests.waiting import until

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN_KEY = "operator-secret-for-console-tests"
OPERATOR = {"Authorization": f"Bearer {ADMIN_KEY}"}
# Generous: this machine is busy, and a bot's restart waits for the fake Bot API.
WAIT_MS = 60_000
DAYS = 30
HANK = "telegram:42"
ENDED = re.compile(r"^(done|failed)$")  # an operation's last states
# The scripted model runs as the demo model's name when none is configured.
PRICING = {
    "currency": "USD",
    "models": {"tally-demo": {"input": 2.0, "cached_input": 0.5, "output": 8.0}},
}
USAGE_FIELDS = (
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "summarizer_calls",
)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def console_tally(
    browser: Browser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: ScriptedProvider | None = None,
    **sections: Any,
) -> AsyncIterator[Tally]:
    """Tally with tenant keys, the operator's key, and a price for the scripted model."""
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = provider or ScriptedProvider(delay_s=0.01)
    async with running_tally(
        browser, tmp_path, provider, auth={"mode": "keys"}, pricing=PRICING, **sections
    ) as tally:
        yield tally


async def tenant_with_chat_key(
    client: httpx.AsyncClient, tenant: str, settings: dict[str, Any] | None = None
) -> str:
    """Create `tenant` (with `settings` overrides); its chat key's secret."""
    body = {"id": tenant, "settings": settings or {}}
    made = await client.post("/api/admin/tenants", headers=OPERATOR, json=body)
    assert made.status_code == 201, made.text
    issued = await client.post(
        f"/api/admin/tenants/{tenant}/keys", headers=OPERATOR, json={"scope": "chat"}
    )
    assert issued.status_code == 201, issued.text
    key: str = issued.json()["key"]
    return key


async def chat(client: httpx.AsyncClient, key: str, turns: int) -> None:
    for n in range(turns):
        sent = await client.post(
            "/api/chat/send", headers=bearer(key), json={"message": f"question {n}"}
        )
        assert sent.status_code == 200, sent.text


async def counted_earlier(tally: Tally, tenant: str, days_ago: int, turns: int) -> None:
    """Usage of `turns` turns `days_ago` UTC days ago, as the turns then would have added it."""
    day = datetime.now(UTC).date() - timedelta(days=days_ago)
    delta = UsageDay(
        tenant_id=tenant,
        day=day,
        turns=turns,
        prompt_tokens=900 * turns,
        completion_tokens=150 * turns,
        cached_tokens=300 * turns,
        cost_micros=3_000 * turns,
    )
    await tally.app.state.services.database.run_write(add_usage, delta)


async def usage_of(tally: Tally) -> dict[str, Any]:
    response = await tally.client.get("/api/admin/usage", headers=OPERATOR, params={"days": DAYS})
    assert response.status_code == 200, response.text
    usage: dict[str, Any] = response.json()
    return usage


async def open_console(tally: Tally, view: str, **context_options: Any) -> Page:
    """The console on `view`, signed in with the operator's key through its form."""
    context = await tally.new_context(**context_options)
    page = await context.new_page()
    await page.goto(f"{tally.base_url}/operator/#/{view}")
    sign_in = page.get_by_test_id("sign-in")
    await expect(sign_in).to_be_visible()  # no key yet: the view's request got 401
    key_box = sign_in.locator("input")
    await key_box.fill(ADMIN_KEY)
    await key_box.press("Enter")
    await expect(sign_in).to_be_hidden()
    return page


async def chart_data(host: Locator) -> dict[str, Any]:
    raw = await host.get_attribute("data-chart")
    assert raw is not None
    data: dict[str, Any] = json.loads(raw)
    return data


async def saved_text(download: Download) -> str:
    """What the page saved, once the download finished."""
    path = Path(await download.path())
    return await asyncio.to_thread(path.read_text, encoding="utf-8")


def last_days(count: int) -> list[str]:
    today = datetime.now(UTC).date()
    return [(today - timedelta(days=n)).isoformat() for n in reversed(range(count))]


def expected_lines(rows: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """One line per tenant (by id), its metric on each of the last days: 0 without usage."""
    values = {
        "tokens": lambda row: row["prompt_tokens"] + row["completion_tokens"],
        "turns": lambda row: row["turns"],
        "cost": lambda row: row["estimated_cost"],
    }[metric]
    by_key = {(row["tenant_id"], row["day"]): row for row in rows}
    tenants = sorted({row["tenant_id"] for row in rows})
    return [
        {
            "tenant": tenant,
            "values": [
                values(by_key[tenant, day]) if (tenant, day) in by_key else 0
                for day in last_days(DAYS)
            ],
        }
        for tenant in tenants
    ]


async def shown_rows(table: Locator) -> list[dict[str, str]]:
    """The table's rows as {field: data-value}, top to bottom."""
    rows: list[dict[str, str]] = await table.locator("tbody tr").evaluate_all(
        """rows => rows.map(row => Object.fromEntries(
            [...row.querySelectorAll("[data-field]")].map(
                cell => [cell.dataset.field, cell.dataset.value ?? ""])))"""
    )
    return rows


def as_shown(row: dict[str, Any]) -> dict[str, str]:
    """An API row as the table's data values hold it (an unknown cost: empty)."""
    cost = row["estimated_cost"]
    fields = {"day": row["day"], "tenant_id": row["tenant_id"]}
    fields |= {field: str(row[field]) for field in USAGE_FIELDS}
    fields["estimated_cost"] = "" if cost is None else format_number(cost)
    return fields


def format_number(value: float) -> str:
    """A number as JavaScript's String() writes it (3.0 is "3")."""
    return str(int(value)) if float(value).is_integer() else repr(value)


async def test_the_usage_view_charts_and_tables_each_tenants_days_as_the_api_counts_them(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(
        delay_s=0.01, usage=Usage(prompt_tokens=1200, completion_tokens=300, cached_tokens=400)
    )
    async with console_tally(browser, tmp_path, monkeypatch, provider) as tally:
        acme = await tenant_with_chat_key(tally.client, "acme")
        globex = await tenant_with_chat_key(tally.client, "globex")
        await chat(tally.client, acme, 3)
        await chat(tally.client, globex, 2)
        await counted_earlier(tally, "acme", days_ago=1, turns=5)
        await counted_earlier(tally, "acme", days_ago=9, turns=2)
        await counted_earlier(tally, "globex", days_ago=4, turns=4)
        usage = await usage_of(tally)
        rows = usage["days"]
        today = datetime.now(UTC).date().isoformat()
        assert usage["currency"] == "USD"
        assert {(r["tenant_id"], r["day"]) for r in rows if r["day"] == today} == {
            ("acme", today),
            ("globex", today),
        }
        assert all(r["estimated_cost"] for r in rows)  # every call had a price

        page = await open_console(tally, "usage")
        view = page.get_by_test_id("view-usage")
        line = view.get_by_test_id("usage-line-chart")
        bars = view.get_by_test_id("usage-bar-chart")
        await expect(line.locator("canvas")).to_have_count(1)  # drawn by uPlot
        await expect(bars.locator("canvas")).to_have_count(1)
        await expect(line.locator(".u-legend")).to_contain_text("acme")
        await expect(line.locator(".u-legend")).to_contain_text("globex")
        table = view.get_by_test_id("usage-table")
        await expect(table.get_by_test_id("usage-row")).to_have_count(len(rows))
        assert await shown_rows(table) == [as_shown(row) for row in rows]  # newest day first
        await expect(table.locator("thead")).to_contain_text("Est. cost (USD)")
        first_cost = table.get_by_test_id("usage-row").first.locator("[data-field=estimated_cost]")
        await expect(first_cost).to_contain_text("$")

        drawn = await chart_data(line)
        assert drawn == {"days": last_days(DAYS), "lines": expected_lines(rows, "tokens")}
        today_rows = sorted(
            (r for r in rows if r["day"] == today),
            key=lambda r: -(r["prompt_tokens"] + r["completion_tokens"]),
        )
        assert [(b["tenant"], b["value"]) for b in (await chart_data(bars))["bars"]] == [
            (r["tenant_id"], r["prompt_tokens"] + r["completion_tokens"]) for r in today_rows
        ]
        shot = await tally.screenshot(page, "operator-usage")
        keep_for_readme(shot, "operator_usage.png")

        metric = view.get_by_test_id("usage-metric")
        await metric.select_option("turns")
        await expect(line).to_have_attribute("data-metric", "turns")
        assert (await chart_data(line))["lines"] == expected_lines(rows, "turns")
        await metric.select_option("cost")
        await expect(line).to_have_attribute("data-metric", "cost")
        assert (await chart_data(line))["lines"] == expected_lines(rows, "cost")
        await expect(line.locator("canvas")).to_have_count(1)  # drawn again, once

        await page.evaluate("document.documentElement.dataset.theme = 'dark'")  # redrawn
        await expect(line.locator("canvas")).to_have_count(1)
        await expect(bars.locator("canvas")).to_have_count(1)

        wide = await line.locator("canvas").bounding_box()
        await page.set_viewport_size({"width": 760, "height": 820})  # it follows the window
        await page.wait_for_function(
            """([host, before]) => host.querySelector("canvas").getBoundingClientRect().width
                < before""",
            arg=[await line.element_handle(), wide["width"] if wide else 0],
            polling=100,
        )

        dark = await open_console(tally, "usage", color_scheme="dark", locale="zh-CN")
        dark_view = dark.get_by_test_id("view-usage")
        await expect(dark_view.locator("h2")).to_have_text("用量")
        await expect(dark_view.get_by_test_id("usage-line-chart").locator("canvas")).to_have_count(
            1
        )
        await tally.screenshot(dark, "operator-usage-dark-zh")


async def test_the_csv_saved_from_the_usage_view_holds_the_api_rows(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with console_tally(browser, tmp_path, monkeypatch) as tally:
        await chat(tally.client, await tenant_with_chat_key(tally.client, "acme"), 2)
        await chat(tally.client, await tenant_with_chat_key(tally.client, "globex"), 1)
        await counted_earlier(tally, "globex", days_ago=3, turns=6)
        rows = (await usage_of(tally))["days"]

        page = await open_console(tally, "usage")
        view = page.get_by_test_id("view-usage")
        await expect(view.get_by_test_id("usage-row")).to_have_count(len(rows))
        async with page.expect_download() as downloading:
            await view.get_by_test_id("usage-csv").click()
        download: Download = await downloading.value
        saved = await saved_text(download)

    assert download.suggested_filename == f"tally-usage-{datetime.now(UTC).date()}.csv"
    parsed = list(csv.DictReader(saved.splitlines()))
    assert len(parsed) == len(rows)
    for line, row in zip(parsed, rows, strict=True):
        assert line["tenant_id"] == row["tenant_id"] and line["day"] == row["day"]
        for field in (*USAGE_FIELDS, "cache_write_tokens", "summarizer_tokens"):
            assert int(line[field]) == row[field], field
        assert float(line["estimated_cost"]) == pytest.approx(row["estimated_cost"])


async def until_connected(client: httpx.AsyncClient) -> None:
    """Until every bot has polled Telegram once (it connects in the background)."""
    bots: list[Any] = []  # as last seen, for the failure's message

    async def connected() -> bool:
        bots[:] = (await client.get("/api/health", headers=OPERATOR)).json()["channels"]
        return bool(bots) and all(bot["connected"] for bot in bots)

    await until(
        connected, lambda: f"every bot connected: {bots}", timeout_s=WAIT_MS / 1000, poll_s=0.05
    )


def starts(telegram: FakeTelegramServer) -> int:
    """How many times a bot started: each start sets its commands."""
    return sum(r.path.endswith("/setMyCommands") for r in telegram.requests)


async def test_a_telegram_bot_restarted_from_the_bots_view_is_connected_again(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    with FakeTelegramServer() as telegram:
        telegram.add_bot(TOKEN, username="tally_test_bot")
        channels = {"tg": bot_settings(telegram)}
        async with console_tally(browser, tmp_path, monkeypatch, channels=channels) as tally:
            await until_connected(tally.client)
            page = await open_console(tally, "bots")
            row = page.get_by_test_id("bot-row").filter(has_text="tg")
            await expect(row).to_have_attribute("data-connected", "true")
            await expect(row.locator("[data-field=kind]")).to_have_text("Telegram")
            await expect(row.locator("[data-field=mode]")).to_have_text("polling")
            await expect(row.locator("[data-field=tenant_id]")).to_have_attribute(
                "data-value", "default"
            )
            await expect(row.locator("[data-field=leading]")).to_have_attribute(
                "data-value", "true"
            )
            await tally.screenshot(page, "operator-bots")

            started = starts(telegram)
            restart = row.get_by_test_id("bot-restart")
            await restart.click()
            await expect(page.locator(".toast")).to_contain_text("tg restarted", timeout=WAIT_MS)
            await expect(restart).to_be_enabled(timeout=WAIT_MS)
            await expect(row).to_have_attribute("data-connected", "true", timeout=WAIT_MS)
            assert starts(telegram) == started + 1  # the bot set itself up again
            health = (await tally.client.get("/api/health", headers=OPERATOR)).json()
            audit = await tally.client.get("/api/admin/audit", headers=OPERATOR)
            await tally.screenshot(page, "operator-bots-restarted")

    (bot,) = health["channels"]
    assert bot["bot"] == "tg" and bot["connected"] is True
    restarts = [e for e in audit.json()["entries"] if e["action"] == "bot.restart"]
    assert [(e["tenant_id"], e["actor"], e["target"]) for e in restarts] == [
        ("default", "operator", "tg")
    ]


async def test_the_memory_view_shows_each_tenants_lines_and_saves_an_export(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = {"acme": ["Ada keeps bees", "Ada hates mornings"], "globex": ["Hank sells hammocks"]}
    # acme keeps one memory; globex one per person, and Hank is telegram:42.
    scopes = {"acme": {}, "globex": {"memory": {"scope": "user"}}}
    async with console_tally(browser, tmp_path, monkeypatch) as tally:
        for tenant, lines in facts.items():
            key = await tenant_with_chat_key(tally.client, tenant, scopes[tenant])
            if tenant == "globex":  # Hank's session makes him one of globex's people
                said = await tally.client.post(
                    "/api/chat/send", headers=bearer(key), json={"message": "hi", "user": HANK}
                )
                assert said.status_code == 200, said.text
            for fact in lines:
                told = await tally.client.post(
                    "/api/memory/entries",
                    headers=bearer(key),
                    params={"user": HANK} if tenant == "globex" else {},
                    json={"content": fact},
                )
                assert told.status_code == 201, told.text
        health = await tally.client.get("/api/admin/memory-health", headers=OPERATOR)
        assert health.status_code == 200, health.text
        tenants = {t["tenant_id"]: t for t in health.json()["tenants"]}
        stored = await tally.client.get("/api/admin/tenants/acme/memory", headers=OPERATOR)
        acme_lines = [e["content"] for e in stored.json()["entries"]]
        assert sorted(acme_lines) == sorted(facts["acme"])

        page = await open_console(tally, "memory")
        view = page.get_by_test_id("view-memory")
        rows = view.get_by_test_id("memory-health-row")
        await expect(rows).to_have_count(len(tenants))
        for tenant, expected in tenants.items():
            row = view.locator(f"[data-testid=memory-health-row][data-tenant='{tenant}']")
            await expect(row.locator("[data-field=lines]")).to_have_attribute(
                "data-value", str(expected["lines"])
            )
            await expect(row.locator("[data-field=status]")).to_have_attribute(
                "data-value", expected["status"]
            )
            await expect(row.locator("[data-field=scope]")).to_have_attribute(
                "data-value", expected["scope"]
            )
            problems = row.get_by_test_id("memory-problem")
            await expect(problems).to_have_count(len(expected["problems"]))
        assert tenants["acme"]["lines"] == 2 and tenants["globex"]["lines"] == 1
        assert (tenants["acme"]["scope"], tenants["globex"]["scope"]) == ("tenant", "user")

        globex = view.locator("[data-testid=memory-health-row][data-tenant=globex]")
        globex_detail = view.locator("[data-testid=memory-health-detail][data-tenant=globex]")
        await globex.get_by_test_id("memory-view-toggle").click()  # whose memory, first
        await globex_detail.get_by_test_id("memory-user").fill(HANK)
        await globex_detail.get_by_test_id("memory-user").press("Enter")
        await expect(globex_detail.locator(".mem-line-text")).to_have_text(facts["globex"])
        await globex.get_by_test_id("memory-view-toggle").click()
        await expect(globex_detail).to_be_hidden()

        acme = view.locator("[data-testid=memory-health-row][data-tenant=acme]")
        detail = view.locator("[data-testid=memory-health-detail][data-tenant=acme]")
        await expect(detail).to_be_hidden()
        await acme.get_by_test_id("memory-view-toggle").click()
        await expect(detail.locator(".mem-line-text")).to_have_text(acme_lines)

        await acme.get_by_test_id("memory-export").click()
        operation = detail.get_by_test_id("operation")
        await expect(operation).to_have_attribute("data-state", ENDED, timeout=WAIT_MS)
        message = await operation.get_by_test_id("operation-message").text_content()
        assert await operation.get_attribute("data-state") == "done", message
        progress = operation.get_by_test_id("operation-progress")
        assert await progress.evaluate("bar => bar.value === bar.max && bar.max > 0")
        await expect(operation.get_by_test_id("operation-count")).to_have_text("Done")
        await tally.screenshot(page, "operator-memory-export")
        async with page.expect_download() as downloading:
            await operation.get_by_test_id("operation-download").click()
        download: Download = await downloading.value
        exported = json.loads(await saved_text(download))
        await expect(acme.get_by_test_id("memory-export")).to_be_enabled()

        await acme.get_by_test_id("memory-resummarize").click()  # no raw line: done at once
        resummarized = detail.locator("[data-testid=operation][data-kind=resummarize]")
        await expect(resummarized).to_have_attribute("data-state", ENDED, timeout=WAIT_MS)
        assert await resummarized.get_attribute("data-state") == "done"
        await expect(detail.get_by_test_id("operation")).to_have_count(1)  # the latest only

    assert download.suggested_filename.endswith(".json")
    assert exported["tenant_id"] == "acme"
    saved = [entry["content"] for memory in exported["memories"] for entry in memory["entries"]]
    assert sorted(saved) == sorted(facts["acme"])
