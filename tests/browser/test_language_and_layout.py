"""Chinese and English, light and dark, phone width, and the demo provider said plainly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, last_reply, running_tally, send, wait_for_reply

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_chinese_reply_and_chinese_interface(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push("你好！这是**中文**回复：记忆窗口之外的消息会写进摘要。")
    page = await tally.open_page(locale="zh-CN")
    await expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    await expect(page.get_by_test_id("input")).to_have_attribute("placeholder", "给 Tally 发消息…")
    await expect(page.get_by_test_id("new-chat")).to_have_text("新对话")

    await send(page, "你好，用中文回答")
    await wait_for_reply(page)
    await expect(last_reply(page).locator(".md")).to_contain_text("记忆窗口之外的消息会写进摘要")
    await expect(last_reply(page).locator("strong")).to_have_text("中文")
    await expect(page.get_by_test_id("summary")).to_be_hidden()  # no summary yet: no card
    await expect(page.get_by_test_id("summary-add")).to_have_attribute("aria-label", "添加摘要")
    await tally.screenshot(page, "chinese")

    await page.get_by_test_id("lang-toggle").click()  # the toggle relabels the page in place
    await expect(page.get_by_test_id("new-chat")).to_have_text("New chat")
    await expect(page.get_by_test_id("input")).to_have_attribute("placeholder", "Message Tally…")
    await expect(page.locator("html")).to_have_attribute("lang", "en")
    await page.reload()  # and the choice is remembered
    await expect(page.get_by_test_id("new-chat")).to_have_text("New chat")


def expected_cause(health: dict[str, Any]) -> str:
    """What the banner must name as the cause, from the server's own health answer."""
    env = health.get("demo_key_env")
    return f"{env} is not set" if env else "no LLM model and key are configured"


async def test_demo_provider_is_shown_plainly(browser: Browser, tmp_path: Path) -> None:
    async with running_tally(browser, tmp_path, provider=None) as tally:
        health = (await tally.client.get("/api/health")).json()
        assert health["is_demo"] is True
        page = await tally.open_page()
        banner = page.get_by_test_id("demo-banner")
        await expect(banner).to_be_visible()
        await expect(banner).to_contain_text("demo provider")
        await expect(banner).to_contain_text(expected_cause(health))

        await send(page, "Is anyone there?")
        await wait_for_reply(page)
        await expect(last_reply(page)).to_contain_text("built-in demo provider")
        await expect(last_reply(page).locator(".badge-demo")).to_be_visible()
        await tally.screenshot(page, "demo")

        await banner.get_by_test_id("demo-dismiss").click()
        await expect(banner).to_be_hidden()
        await page.reload()  # remembered for this browser session
        await expect(page.locator(".thread .window")).to_be_attached()  # drawn after health
        await expect(banner).to_be_hidden()
        fresh = await tally.open_page()  # another browser session shows it again
        await expect(fresh.get_by_test_id("demo-banner")).to_be_visible()


async def test_demo_banner_speaks_chinese_and_never_shows_the_english_notice(
    browser: Browser, tmp_path: Path
) -> None:
    async with running_tally(browser, tmp_path, provider=None) as tally:
        health = (await tally.client.get("/api/health")).json()
        page = await tally.open_page(locale="zh-CN")
        banner = page.get_by_test_id("demo-banner")
        await expect(banner).to_contain_text("演示模式")
        await expect(banner).to_contain_text("内置的演示模型")
        text = await banner.inner_text()
        assert health["notice"] not in text
        assert "provider" not in text and "configured" not in text
        if health.get("demo_key_env"):
            assert health["demo_key_env"] in text
        else:
            assert "未配置任何 LLM 模型和密钥" in text
        await expect(banner.get_by_test_id("demo-dismiss")).to_have_attribute(
            "aria-label", "关闭提示"
        )
        await tally.screenshot(page, "demo-chinese")

        await page.get_by_test_id("lang-toggle").click()  # relabelled in place
        await expect(banner).to_contain_text(expected_cause(health))


async def test_demo_banner_text_is_built_from_the_health_fields(tally: Tally) -> None:
    """The fields `GET /api/health` may carry, as the page reads them, in both languages."""
    page = await tally.open_page()
    texts = await page.evaluate(
        """async () => {
            const { demoNoticeText } = await import("/banner.js");
            const { setLanguage } = await import("/i18n.js");
            const shapes = [
                {
                    is_demo: true,
                    demo_key_env: "ANTHROPIC_API_KEY",
                    demo_window: 6,
                    demo_config_file: "/srv/tally/deploy.yaml",
                },
                { is_demo: true, demo_key_env: null, demo_window: null },
                { is_demo: true, notice: "No LLM provider key is configured: ..." },
                { is_demo: true, demo_key_env: "<b>not a name</b>", demo_window: "6" },
            ];
            const english = shapes.map(demoNoticeText);
            setLanguage("zh");
            const chinese = shapes.map(demoNoticeText);
            setLanguage("en");
            return { english, chinese };
        }"""
    )
    named, none, absent, odd = texts["english"]
    assert "ANTHROPIC_API_KEY is not set" in named and "last 6 messages" in named
    assert "key's variable are set in /srv/tally/deploy.yaml" in named
    assert "no LLM model and key are configured" in none and "messages" not in none
    assert "config.yaml" not in none  # no file is named that the server did not read
    assert absent == none  # an older server, without the new fields
    assert odd == none
    named_zh, none_zh, _, _ = texts["chinese"]
    assert "未设置 ANTHROPIC_API_KEY" in named_zh and "最近的 6 条消息" in named_zh
    assert "/srv/tally/deploy.yaml" in named_zh
    assert "未配置任何 LLM 模型和密钥" in none_zh


async def test_phone_width_dark_theme_keeps_everything_reachable(
    tally: Tally, provider: ScriptedProvider
) -> None:
    await tally.client.post("/api/chat/sessions", json={"title": "Earlier chat", "channel": "web"})
    provider.push("A reply that fits the screen. " * 6)
    page = await tally.open_page(color_scheme="dark", width=380, height=760)
    await expect(page.locator("#sidebar")).not_to_be_in_viewport()
    background = await page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(17, 19, 24)"  # prefers-color-scheme: dark

    await send(page, "Hello from a phone")
    await wait_for_reply(page)
    scroll_width = await page.evaluate("() => document.documentElement.scrollWidth")
    assert scroll_width <= 380  # nothing overflows sideways
    await expect(page.get_by_test_id("send")).to_be_in_viewport()
    await tally.screenshot(page, "phone-dark")

    await page.get_by_test_id("menu-button").click()
    await expect(page.get_by_test_id("session-item").first).to_be_in_viewport()
    await expect(page.get_by_test_id("session-item")).to_have_count(2)
    await page.get_by_test_id("theme-toggle").click()  # the toggle overrides the system
    background = await page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(255, 255, 255)"
    await tally.screenshot(page, "phone-menu-light")


HEAD_BOXES = """() => {
            const box = (el) => el.getBoundingClientRect().toJSON();
            const title = document.getElementById("chat-title");
            return {
                title: box(title),
                gauge: box(document.getElementById("context-gauge")),
                head: box(document.querySelector(".chat-head")),
                buttons: [...document.querySelectorAll(".chat-head button:not([hidden])")]
                    .map(box),
                isCut: title.scrollWidth > title.clientWidth,
                overflow: getComputedStyle(title).textOverflow,
                pageWidth: document.documentElement.scrollWidth,
            };
        }"""


async def test_a_long_title_on_a_phone_ends_in_an_ellipsis_and_keeps_the_gauge_in_view(
    browser: Browser, tmp_path: Path
) -> None:
    provider = ScriptedProvider(delay_s=0.01)
    async with running_tally(
        browser,
        tmp_path,
        provider,
        providers={"m": {"kind": "scripted"}},
        model={"provider": "m", "name": "claude-3-7-sonnet-20250219-extended-preview"},
    ) as tally:
        title = "A very long conversation title about planning the allotment garden " * 3
        session = await tally.client.post(
            "/api/chat/sessions", json={"title": title.strip(), "channel": "web"}
        )
        provider.push("Noted.")
        page = await tally.open_page(f"/#/s/{session.json()['id']}", width=390, height=844)
        await send(page, "Hello from a phone")
        await wait_for_reply(page)
        gauge = page.get_by_test_id("context-gauge")
        await expect(gauge).to_be_visible()
        await expect(gauge).to_be_in_viewport(ratio=1)

        boxes = await page.evaluate(HEAD_BOXES)
        gauge_box, title_box = boxes["gauge"], boxes["title"]
        assert 0 <= gauge_box["left"] and gauge_box["right"] <= 390, gauge_box
        assert title_box["right"] <= gauge_box["left"], (title_box, gauge_box)
        assert boxes["isCut"] and boxes["overflow"] == "ellipsis"  # cut, with "…"
        assert boxes["head"]["right"] <= 390 and boxes["pageWidth"] <= 390
        for button in boxes["buttons"]:
            assert 0 <= button["left"] and button["right"] <= 390, button
        await tally.screenshot(page, "phone-long-title")

        await page.get_by_test_id("rename-session").click()  # the rename box fits too
        rename_box = page.locator(".chat-head .inline-input")
        await expect(rename_box).to_be_focused()
        await expect(gauge).to_be_in_viewport(ratio=1)
        assert await page.evaluate("() => document.documentElement.scrollWidth") <= 390
        await expect(rename_box).to_be_in_viewport(ratio=1)
