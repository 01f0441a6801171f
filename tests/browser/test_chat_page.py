"""The chat page: streaming, tool cards, stop, retry, safe Markdown."""

from __future__ import annotations

import asyncio
import base64
import re
import struct
import zlib
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.async_api import Browser, Route, expect

from backend.domain.messages import ToolCall
from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider, ScriptedThinking, ScriptedToolCalls
from tests.browser.harness import (
    Tally,
    keep_for_readme,
    last_reply,
    running_tally,
    send,
    wait_for_reply,
)
from tests.fakes.summarizer import EchoSummarizer

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")


MARKDOWN_REPLY = """It is **{time}** in Shanghai right now. Here is a small helper \
that does the same thing in Python:

```python
from datetime import datetime
from zoneinfo import ZoneInfo

def now_in(zone: str) -> str:
    return datetime.now(ZoneInfo(zone)).isoformat(timespec="minutes")
```

- `ZoneInfo` reads the system time-zone database.
- Pass any IANA name, such as `Europe/Paris`.

That is all it takes."""


def png(width: int, height: int) -> bytes:
    """A small gradient picture, encoded by hand (no imaging library needed)."""
    rows = b"".join(
        b"\x00" + bytes(c for x in range(width) for c in (x * 255 // width, 150, y * 255 // height))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        checksum = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + checksum

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + b"".join(
        [chunk(b"IHDR", header), chunk(b"IDAT", zlib.compress(rows)), chunk(b"IEND", b"")]
    )


async def test_reply_streams_before_the_turn_completes(
    tally: Tally, provider: ScriptedProvider
) -> None:
    for title in ("Kyoto trip: three-day plan", "Quarterly report outline", "Rust lifetimes"):
        await tally.client.post("/api/chat/sessions", json={"title": title, "channel": "web"})
    provider.delay_s = 0.03
    call = ToolCall(id="c1", name="now", arguments={"timezone": "Asia/Shanghai"})
    shanghai_time = datetime.now(ZoneInfo("Asia/Shanghai")).strftime("%H:%M")
    reply = MARKDOWN_REPLY.replace("{time}", shanghai_time)
    provider.push(ScriptedToolCalls([call], text="Let me check the clock there."), reply)
    page = await tally.open_page(height=900)

    await send(page, "What time is it in Shanghai right now?")
    text = last_reply(page).locator(".md").last
    await expect(text).to_contain_text("in Shanghai right now")
    partial = await page.evaluate(
        """() => {
            const reply = document.querySelectorAll('[data-testid=assistant-message]');
            const last = reply[reply.length - 1];
            return {status: last.dataset.status, text: last.textContent};
        }"""
    )
    assert partial["status"] == "streaming"
    assert "all it takes" not in partial["text"]
    await expect(page.get_by_test_id("stop")).to_be_visible()

    await wait_for_reply(page)
    await expect(last_reply(page)).to_contain_text("That is all it takes.")
    await expect(last_reply(page).locator(".code-block")).to_contain_text("def now_in")
    await expect(page.get_by_test_id("send")).to_be_visible()
    assert "#/s/" in page.url  # the URL names the new session
    await expect(page.get_by_test_id("session-item")).to_have_count(4)
    await page.mouse.move(0, 0)
    keep_for_readme(await tally.screenshot(page, "streamed-reply"), "screenshot.png")


async def test_tool_call_appears_as_a_card_live_and_after_reload(
    tally: Tally, provider: ScriptedProvider
) -> None:
    call = ToolCall(id="c1", name="now", arguments={"timezone": "Asia/Shanghai"})
    provider.push(ScriptedToolCalls([call]), "It is evening in Shanghai.")
    page = await tally.open_page()

    await send(page, "What time is it in Shanghai?")
    await wait_for_reply(page)
    card = page.get_by_test_id("tool-card")
    await expect(card).to_have_count(1)
    await expect(card).to_contain_text("now")
    await expect(card).to_contain_text("Asia/Shanghai")
    await expect(card).to_contain_text("+08:00")  # the tool's result
    await expect(card.locator(".tool-status")).to_contain_text("ms")
    await expect(card).to_have_attribute("data-state", "ok")

    await page.reload()
    card = page.get_by_test_id("tool-card")
    await expect(card).to_have_count(1)  # rebuilt from the tool-conversations endpoint
    await expect(card).to_contain_text("Asia/Shanghai")
    await expect(card).to_contain_text("+08:00")
    await expect(last_reply(page)).to_contain_text("It is evening in Shanghai.")
    await tally.screenshot(page, "tool-card")


async def test_stop_cancels_the_turn_and_marks_the_reply_incomplete(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.delay_s = 0.1
    provider.push(" ".join(f"word{n}" for n in range(200)))
    page = await tally.open_page()

    await send(page, "Count for me, slowly.")
    await expect(last_reply(page).locator(".md")).to_contain_text("word2")
    await page.get_by_test_id("stop").click()

    error = page.get_by_test_id("turn-error")
    await expect(error.get_by_test_id("error-code")).to_have_text("cancelled")
    await expect(error.get_by_test_id("retry")).to_be_visible()
    await expect(last_reply(page)).to_have_attribute("data-status", "incomplete")
    await expect(page.get_by_test_id("incomplete-badge")).to_be_visible()
    assert "word199" not in await last_reply(page).inner_text()
    await expect(page.get_by_test_id("send")).to_be_visible()
    await tally.screenshot(page, "stopped")

    await page.reload()  # the stored reply is marked incomplete too
    await expect(last_reply(page)).to_have_attribute("data-status", "incomplete")
    await expect(page.get_by_test_id("incomplete-badge")).to_be_visible()


async def test_failed_send_keeps_the_input_and_retry_answers(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push(ProviderUnavailable("scripted", "the model is overloaded"), "Second time lucky.")
    page = await tally.open_page()

    await send(page, "Hello?")
    error = page.get_by_test_id("turn-error")
    await expect(error.get_by_test_id("error-code")).to_have_text("provider_unavailable")
    await expect(error).to_contain_text("the model is overloaded")
    await error.get_by_test_id("retry").click()
    await wait_for_reply(page)
    await expect(last_reply(page)).to_contain_text("Second time lucky.")
    await expect(page.get_by_test_id("user-message")).to_have_count(1)  # same turn, resumed

    session_id = page.url.rsplit("/", 1)[-1]
    await tally.client.delete(f"/api/chat/sessions/{session_id}")
    await send(page, "Are you still there?")  # refused before any stream: session is gone
    await expect(page.get_by_test_id("error-code").last).to_have_text("session_not_found")
    await expect(page.get_by_test_id("input")).to_have_value("Are you still there?")
    await tally.screenshot(page, "failed-send")


async def test_model_output_cannot_run_script_or_inject_markup(
    tally: Tally, provider: ScriptedProvider
) -> None:
    payload = (
        'Look: <img src=x onerror="window.__pwned = 1"> and '
        "<script>window.__pwned = 2</script> "
        "[click me](javascript:window.__pwned=3) "
        '![pic](https://example.invalid/x.png" onerror="window.__pwned=4) '
        "<a href=x onclick=window.__pwned=5>raw link</a> **still bold**"
    )
    provider.push(payload)
    page = await tally.open_page()

    await send(page, "Say something dangerous.")
    await wait_for_reply(page)
    await expect(last_reply(page)).to_contain_text('<img src=x onerror="window.__pwned = 1">')
    for attempt in ("fresh", "reloaded"):
        await page.wait_for_timeout(200)  # time for an injected onerror to have fired
        assert await page.evaluate("() => window.__pwned") is None, attempt
        reply = last_reply(page)
        assert await reply.locator("img, script, iframe, [onerror], [onclick]").count() == 0
        assert await reply.locator("a[href^='javascript' i]").count() == 0
        await expect(reply.locator("strong")).to_have_text("still bold")
        if attempt == "fresh":
            await page.reload()
            await wait_for_reply(page)
    await tally.screenshot(page, "sanitized")


async def test_attached_image_is_sent_and_shown_in_the_message(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push("A gradient: green at the top left, turning pink and blue.")
    picture = png(120, 80)
    encoded = base64.b64encode(picture).decode()
    page = await tally.open_page()

    await page.get_by_test_id("attach-input").set_input_files(
        [
            {"name": "gradient.png", "mimeType": "image/png", "buffer": picture},
            {"name": "huge.png", "mimeType": "image/png", "buffer": bytes(5 * 1024 * 1024 + 1)},
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"not a picture"},
        ]
    )
    await expect(page.get_by_test_id("attachment")).to_have_count(1)  # the others refused
    await expect(page.locator(".toast.is-error")).to_have_text(
        ["huge.png is larger than 5 MB.", "notes.txt is not a PNG, JPEG, GIF or WebP image."]
    )
    await page.get_by_test_id("input").fill("What is in this picture?")
    await tally.screenshot(page, "image-attached")

    await page.get_by_test_id("input").press("Enter")
    await wait_for_reply(page)
    shown = page.get_by_test_id("user-message").locator("img.msg-image")
    await expect(shown).to_have_attribute("src", f"data:image/png;base64,{encoded}")
    await expect(page.get_by_test_id("attachment")).to_have_count(0)  # sent: the box let go
    sent = provider.requests[-1].messages[-1]
    assert [(i.media_type, i.data) for i in sent.images] == [("image/png", encoded)]
    assert sent.content == "What is in this picture?"

    await page.reload()
    await expect(page.get_by_test_id("user-message").locator("img.msg-image")).to_have_attribute(
        "src", f"data:image/png;base64,{encoded}"
    )
    await page.mouse.move(0, 0)
    await tally.screenshot(page, "image-sent")


def unreachable_provider(port: int) -> dict[str, object]:
    """A provider at `port`, which refuses connections (the `refused_port` fixture)."""
    return {
        "kind": "openai_compatible",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "max_retries": 1,
        "connect_timeout_s": 2,
    }


async def test_a_refused_connection_is_named_not_called_busy(
    browser: Browser, tmp_path: Path, refused_port: int
) -> None:
    """The real OpenAI adapter against a port that refuses: the retry notice and the turn's
    error name the provider, its URL and the cause."""
    provider = unreachable_provider(refused_port)
    async with running_tally(
        browser,
        tmp_path,
        provider=None,
        providers={"unreachable": provider},
        model={"provider": "unreachable", "name": "gpt-4o-mini"},
    ) as tally:
        cause = f"unreachable ({provider['base_url']}): connection refused"
        page = await tally.open_page()
        await send(page, "Hello?")
        await wait_for_reply(page, "failed")
        reply = last_reply(page)
        notice = reply.locator(".reply-notice")
        await expect(notice).to_have_count(1)  # one retry, then the error
        await expect(notice).to_have_text(f"{cause}; retrying in 1 s (attempt 1)…")
        error = reply.get_by_test_id("turn-error")
        await expect(error.get_by_test_id("error-code")).to_have_text("provider_unavailable")
        await expect(error.locator(".turn-error-message")).to_contain_text(cause)
        text = (await reply.inner_text()).casefold()
        assert "busy" not in text
        await tally.screenshot(page, "provider-refused")

        await page.get_by_test_id("lang-toggle").click()
        await expect(notice).to_have_text(f"{cause}；1 秒后重试（第 1 次）…")

        # Health is now "degraded" for the provider, not the database: no database alarm.
        health = (await tally.client.get("/api/health")).json()
        assert health["status"] == "degraded" and health["database"] == "ok"
        fresh = await tally.open_page()
        await expect(fresh.get_by_test_id("model-pill")).to_have_text("gpt-4o-mini")
        await expect(fresh.locator(".toast")).to_have_count(0)
        assert "繁忙" not in await reply.inner_text()


async def test_a_fallback_model_is_announced_and_answers(
    browser: Browser, tmp_path: Path, refused_port: int
) -> None:
    async with running_tally(
        browser,
        tmp_path,
        provider=None,
        providers={
            "unreachable": unreachable_provider(refused_port),
            "backup": {"kind": "scripted", "replies": ["The backup model answers."]},
        },
        model={
            "provider": "unreachable",
            "name": "gpt-4o-mini",
            "fallbacks": [{"provider": "backup", "name": "backup-model"}],
        },
    ) as tally:
        page = await tally.open_page()
        await send(page, "Anyone?")
        await wait_for_reply(page)
        reply = last_reply(page)
        await expect(reply.locator(".reply-notice")).to_have_text(
            [
                re.compile(
                    r"unreachable \(http://127\.0\.0\.1:\d+/v1\): connection refused;"
                    r" retrying in 1 s \(attempt 1\)…"
                ),
                "Trying backup instead…",
            ]
        )
        await expect(reply.locator(".md")).to_have_text("The backup model answers.")
        assert "busy" not in (await reply.inner_text()).casefold()


async def stored_messages(tally: Tally, session_id: str) -> list[tuple[str, str]]:
    listed = await tally.client.get(f"/api/chat/sessions/{session_id}/messages")
    return [(m["role"], m["content"]) for m in listed.json()["messages"]]


async def test_regenerate_sends_the_last_message_again_as_a_new_turn(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.delay_s = 0.05
    provider.push("Blue.", "Green, " + " ".join(f"shade{n}" for n in range(20)))
    picture = base64.b64encode(png(8, 8)).decode()
    page = await tally.open_page()
    await page.get_by_test_id("attach-input").set_input_files(
        [{"name": "dot.png", "mimeType": "image/png", "buffer": png(8, 8)}]
    )
    await send(page, "Name a colour.")
    await wait_for_reply(page)
    regenerate = page.get_by_test_id("regenerate")
    await expect(regenerate).to_have_count(1)
    await expect(last_reply(page).get_by_test_id("regenerate")).to_be_visible()

    await regenerate.click()
    await expect(last_reply(page).locator(".md")).to_contain_text("shade1")
    await expect(page.get_by_test_id("regenerate")).to_have_count(0)  # not while it runs
    await expect(page.get_by_test_id("edit-resend")).to_have_count(0)
    await wait_for_reply(page)
    await expect(last_reply(page)).to_contain_text("shade19")
    await expect(page.get_by_test_id("user-message")).to_have_count(2)
    await expect(page.get_by_test_id("assistant-message")).to_have_count(2)
    await expect(regenerate).to_have_count(1)  # on the new last turn only
    await expect(last_reply(page).get_by_test_id("regenerate")).to_have_count(1)
    sent = provider.requests[-1].messages[-1]
    assert sent.content == "Name a colour."
    assert [i.data for i in sent.images] == [picture]  # its picture went again too

    session_id = page.url.rsplit("/", 1)[-1]
    assert [content for _, content in await stored_messages(tally, session_id)] == [
        "Name a colour.",
        "Blue.",  # the first reply is kept: a new turn, nothing rewritten
        "Name a colour.",
        "Green, " + " ".join(f"shade{n}" for n in range(20)),
    ]
    await page.reload()  # stored turns get the actions too, on the last one
    await expect(page.get_by_test_id("regenerate")).to_have_count(1)
    await expect(last_reply(page).get_by_test_id("regenerate")).to_have_count(1)
    provider.push("Red.")
    await page.get_by_test_id("regenerate").click()
    await wait_for_reply(page)
    await expect(last_reply(page)).to_contain_text("Red.")
    last_regenerate = last_reply(page).get_by_test_id("regenerate")
    await expect(last_regenerate).to_have_css("opacity", "1")  # shown without hovering
    assert [i.data for i in provider.requests[-1].messages[-1].images] == [picture]
    await tally.screenshot(page, "regenerated")


async def test_edit_and_resend_sends_the_edited_text_as_a_new_turn(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push("Paris.", "Rome.")
    page = await tally.open_page()
    await send(page, "Capital of France?")
    await wait_for_reply(page)
    edit = page.get_by_test_id("edit-resend")
    await expect(edit).to_have_count(1)
    await expect(
        page.get_by_test_id("user-message").last.get_by_test_id("edit-resend")
    ).to_be_visible()

    await edit.click()
    box = page.get_by_test_id("edit-input")
    await expect(box).to_have_value("Capital of France?")
    await expect(box).to_be_focused()
    await box.press("Escape")  # cancel: the message is as it was
    await expect(box).to_have_count(0)
    await expect(page.get_by_test_id("user-message").locator(".bubble")).to_have_text(
        "Capital of France?"
    )

    await edit.click()
    await box.fill("Capital of Italy?")
    await box.press("Enter")
    await wait_for_reply(page)
    await expect(last_reply(page)).to_contain_text("Rome.")
    await expect(page.get_by_test_id("user-message").locator(".bubble")).to_have_text(
        ["Capital of France?", "Capital of Italy?"]  # the original is not rewritten
    )
    await expect(edit).to_have_count(1)
    await expect(
        page.get_by_test_id("user-message").last.get_by_test_id("edit-resend")
    ).to_have_count(1)
    assert provider.requests[-1].messages[-1].content == "Capital of Italy?"
    session_id = page.url.rsplit("/", 1)[-1]
    assert await stored_messages(tally, session_id) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "Capital of Italy?"),
        ("assistant", "Rome."),
    ]
    await expect(page.get_by_test_id("input")).to_have_value("")  # the composer was not used
    await tally.screenshot(page, "edited-and-resent")


async def test_reasoning_is_kept_with_the_reply_and_shown_collapsed_after_a_reload(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push(ScriptedThinking("The user wants a number. Seven is prime.", "Seven."))
    page = await tally.open_page()
    await send(page, "Pick a prime number.")
    await wait_for_reply(page)
    await page.reload()
    thinking = last_reply(page).locator("details.thinking")
    await expect(thinking).to_have_count(1)
    assert await thinking.get_attribute("open") is None  # collapsed until asked for
    await expect(thinking.locator("summary")).to_contain_text("Thinking")
    await thinking.locator("summary").click()
    await expect(thinking).to_contain_text("Seven is prime.")
    await expect(last_reply(page).locator(".md")).to_have_text("Seven.")
    await tally.screenshot(page, "thinking-after-reload")


async def test_a_reply_says_when_memory_is_degraded(browser: Browser, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the memory folder should be", encoding="utf-8")
    provider = ScriptedProvider(replies=["Hello!"])
    async with running_tally(
        browser, tmp_path, provider, memory={"path": str(blocker / "MEMORY.md")}
    ) as tally:
        page = await tally.open_page()
        await send(page, "Do you remember me?")
        await wait_for_reply(page)
        notice = last_reply(page).get_by_test_id("memory-degraded")
        await expect(notice).to_contain_text("Memory is degraded")
        await expect(notice).to_contain_text("could not be read")
        await expect(last_reply(page).locator(".md")).to_have_text("Hello!")
        await tally.screenshot(page, "memory-degraded")


async def test_a_message_sent_while_the_thread_redraws_after_a_compaction_stays(
    browser: Browser, tmp_path: Path
) -> None:
    provider = ScriptedProvider(replies=["Noted."])
    async with running_tally(
        browser,
        tmp_path,
        provider,
        summarizer=EchoSummarizer(),
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2},
    ) as tally:
        page = await tally.open_page()
        for text in ("one", "two"):
            await send(page, text)
            await wait_for_reply(page)
        held = asyncio.Event()
        release = asyncio.Event()

        async def hold_the_redraw(route: Route) -> None:
            """The thread's messages as the server had them, handed over only later."""
            response = await route.fetch()
            held.set()
            await release.wait()
            await route.fulfill(response=response)

        # A turn that moves the window makes the page reload the thread: held here.
        await page.route("**/api/chat/sessions/*/messages*", hold_the_redraw)
        await send(page, "three")
        await wait_for_reply(page)
        await tally.app.state.services.runtimes.wait_idle()  # the window moved on the server
        if not held.is_set():  # the page looked before it moved: the next turn sees it
            await send(page, "four")
            await wait_for_reply(page)
        await asyncio.wait_for(held.wait(), timeout=30)
        await send(page, "five, sent while the thread reloads")
        await wait_for_reply(page)
        release.set()  # the older messages arrive after the new turn
        await tally.app.state.services.runtimes.wait_idle()
        await page.wait_for_load_state("networkidle")
        await expect(page.get_by_test_id("user-message").last).to_contain_text("five, sent while")
        await expect(last_reply(page)).to_have_attribute("data-status", "complete")
        await expect(last_reply(page)).to_contain_text("Noted.")
