"""The memory panel: entries listed, edited in place, deleted, traced to their conversation and
reverted."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import pytest
from playwright.async_api import Browser, Route, expect

from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, running_tally
from tests.fakes.summarizer import EchoSummarizer

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

MEMORY_TEXT = """\
# MEMORY.md — kept by hand as well
#
2026-11-28|web|Prefers metric units
this line is not an entry and stays as written
2026-11-29|manual|Grows tomatoes
2026-11-30|manual|Lives in Lisbon
"""


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
    content = "2026-11-29|web|Prefers metric units\n2026-11-30|manual|Grows tomatoes\n"
    assert (await tally.client.put("/api/memory", json={"content": content})).status_code == 200
    page = await tally.open_page()

    await page.get_by_test_id("memory-button").click()
    entries = page.get_by_test_id("memory-entry")
    await expect(entries).to_have_count(2)
    await expect(entries.first).to_contain_text("Grows tomatoes")  # newest first
    await expect(entries.first.get_by_test_id("memory-source")).to_have_text("manual")
    await (
        entries.filter(has_text="Prefers metric units").get_by_role("button", name="Delete").click()
    )
    await expect(entries).to_have_count(1)
    remaining = (await tally.client.get("/api/memory")).json()["entries"]
    assert [e["content"] for e in remaining] == ["Grows tomatoes"]
    await tally.screenshot(page, "memory")


async def test_memory_entry_edited_in_the_page_persists_after_reload(tally: Tally) -> None:
    assert (await tally.client.put("/api/memory", json={"content": MEMORY_TEXT})).status_code == 200
    page = await tally.open_page()
    await page.get_by_test_id("memory-button").click()
    entry = page.get_by_test_id("memory-entry").nth(1)  # newest first: the middle line
    await expect(entry.get_by_test_id("memory-content")).to_have_text("Grows tomatoes")

    await entry.get_by_test_id("memory-edit-entry").click()
    box = entry.get_by_test_id("memory-entry-input")
    await expect(box).to_have_value("Grows tomatoes")
    await box.fill("Grows tomatoes | and basil,\non the balcony")
    await box.press("Enter")
    edited = page.get_by_test_id("memory-entry").filter(has_text="balcony")
    await expect(edited.get_by_test_id("memory-content")).to_have_text(
        "Grows tomatoes ¦ and basil, on the balcony"  # one line, and `|` cannot split it
    )
    await expect(page.get_by_test_id("memory-entry")).to_have_count(3)

    stored = (await tally.client.get("/api/memory")).json()["content"]
    expected = MEMORY_TEXT.replace(
        "2026-11-29|manual|Grows tomatoes",
        "2026-11-29|manual|Grows tomatoes ¦ and basil, on the balcony",
    )
    assert stored == expected  # every other line exactly as it was
    await tally.screenshot(page, "memory-entry-edited")

    await page.reload()
    await page.get_by_test_id("memory-button").click()
    await expect(page.get_by_test_id("memory-content")).to_have_text(
        ["Lives in Lisbon", "Grows tomatoes ¦ and basil, on the balcony", "Prefers metric units"]
    )

    await page.get_by_test_id("memory-edit-entry").first.click()  # Escape leaves it unchanged
    await page.get_by_test_id("memory-entry-input").press("Escape")
    await expect(page.get_by_test_id("memory-entry-input")).to_have_count(0)
    await expect(page.get_by_test_id("memory-panel")).to_be_visible()
    assert (await tally.client.get("/api/memory")).json()["content"] == expected


async def test_a_compacted_entry_links_to_its_conversation_and_reverts(
    browser: Browser, tmp_path: Path
) -> None:
    provider = ScriptedProvider(delay_s=0.01)
    async with running_tally(
        browser,
        tmp_path,
        provider,
        summarizer=EchoSummarizer(),
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2},
    ) as tally:
        session = await tally.client.post(
            "/api/chat/sessions", json={"title": "Garden planning", "channel": "web"}
        )
        session_id = session.json()["id"]
        questions = ["Tomatoes by the south wall?", "And basil?", "Water daily?", "Compost?"]
        for question in [*questions, "What else?"]:
            provider.push("Noted.")
            reply = await tally.client.post(
                "/api/chat/send", json={"session_id": session_id, "message": question}
            )
            assert reply.status_code == 200, reply.text
            await tally.app.state.services.runtimes.wait_idle()  # the summarizer compacts
        page = await tally.open_page()

        await page.get_by_test_id("memory-button").click()
        entries = page.get_by_test_id("memory-entry")
        await expect(entries).to_have_count(2)  # two compactions, newest first
        newest, oldest = entries.first, entries.last
        await expect(newest.get_by_test_id("memory-source")).to_have_text("auto-overflow")
        await expect(newest.get_by_test_id("memory-content")).to_contain_text("Water daily?")
        await expect(newest.get_by_test_id("memory-provenance")).to_have_text(
            "From “Garden planning” · messages #5–#8"
        )
        await expect(oldest.get_by_test_id("memory-provenance")).to_have_text(
            "From “Garden planning” · messages #1–#4"
        )
        await newest.get_by_test_id("memory-provenance").click()  # opens that conversation
        await expect(page.get_by_test_id("memory-panel")).to_be_hidden()
        await expect(page.get_by_test_id("chat-title")).to_have_text("Garden planning")
        await expect(page.get_by_test_id("user-message")).to_have_count(1)  # "What else?"

        await page.get_by_test_id("memory-button").click()
        await oldest.get_by_test_id("memory-revert").click()  # a later compaction builds on it
        await oldest.get_by_test_id("memory-revert-confirm").click()
        await expect(page.locator(".toast").last).to_contain_text("being summarized again")
        await tally.app.state.services.runtimes.wait_idle()  # distilled again, as a new line
        await page.get_by_test_id("memory-panel").locator(".memory-close").click()
        await page.get_by_test_id("memory-button").click()
        await expect(entries).to_have_count(2)
        newest = entries.filter(has_text="#5–#8")
        await expect(entries.filter(has_text="#1–#4")).to_contain_text("Tomatoes")
        await newest.get_by_test_id("memory-revert").click()
        await expect(newest).to_contain_text("messages #5–#8 return to the conversation")
        await page.mouse.move(0, 0)
        await tally.screenshot(page, "memory-revert")

        await newest.get_by_test_id("memory-revert-confirm").click()
        await expect(entries).to_have_count(1)
        await expect(entries.get_by_test_id("memory-provenance")).to_contain_text("#1–#4")
        # The open conversation is drawn again: the reverted turns are back in its window.
        await expect(page.get_by_test_id("user-message")).to_have_count(3)
        stored = (await tally.client.get(f"/api/chat/sessions/{session_id}")).json()
        assert stored["window_start_id"] == 5
        memory = (await tally.client.get("/api/memory")).json()
        assert [e["provenance"]["first_message_id"] for e in memory["entries"]] == [1]
        await page.get_by_test_id("memory-panel").locator(".memory-close").click()
        await expect(page.locator(".window")).to_contain_text("Water daily?")
        await tally.screenshot(page, "memory-reverted")


async def test_an_edit_begun_as_the_panel_opens_survives_the_fresh_list(tally: Tally) -> None:
    """Opening the panel reloads the list; an entry clicked meanwhile must not be drawn
    away under the reader, with the edit box it opened."""
    content = "2026-11-29|web|Prefers metric units\n2026-11-30|manual|Grows tomatoes\n"
    assert (await tally.client.put("/api/memory", json={"content": content})).status_code == 200
    page = await tally.open_page()
    await expect(page.get_by_test_id("memory-button")).to_be_visible()  # the first read is in
    reload_released = asyncio.Event()

    async def hold_reload(route: Route) -> None:
        await reload_released.wait()
        await route.continue_()

    await page.route("**/api/memory", hold_reload)
    await page.get_by_test_id("memory-button").click()
    entry = page.get_by_test_id("memory-entry").first
    clicking = asyncio.ensure_future(entry.get_by_test_id("memory-edit-entry").click())
    # The reload answers once the panel shows it is loading, or the click has opened an edit.
    loading_or_editing = page.locator(".memory-list .muted, [data-testid=memory-entry-input]")
    await expect(loading_or_editing.first).to_be_visible()
    reload_released.set()
    await clicking
    box = page.get_by_test_id("memory-entry-input")
    await expect(page.get_by_test_id("memory-entry")).to_have_count(2)
    await expect(box).to_have_value("Grows tomatoes")
    await expect(box).to_be_focused()
    await box.fill("Grows tomatoes and beans")
    await box.press("Enter")
    await expect(page.get_by_test_id("memory-content").first).to_have_text(
        "Grows tomatoes and beans"
    )


async def test_lines_that_do_not_parse_are_shown_flagged_not_hidden(tally: Tally) -> None:
    assert (await tally.client.put("/api/memory", json={"content": MEMORY_TEXT})).status_code == 200
    page = await tally.open_page()
    await page.get_by_test_id("memory-button").click()

    await expect(page.get_by_test_id("memory-entry")).to_have_count(3)
    invalid = page.get_by_test_id("memory-invalid-line")
    await expect(invalid).to_have_count(1)  # the `#` header lines are comments, not problems
    await expect(invalid.get_by_test_id("memory-invalid-text")).to_have_text(
        "this line is not an entry and stays as written"
    )
    await expect(invalid).to_contain_text("not parsed")
    assert "date|source|fact" in (await invalid.get_attribute("title") or "")
    await expect(invalid.get_by_role("button")).to_have_count(0)  # it is fixed as text
    await tally.screenshot(page, "memory-invalid-line")

    await page.keyboard.press("Escape")  # closes the panel
    await page.get_by_test_id("lang-toggle").click()
    await page.get_by_test_id("memory-button").click()
    await expect(invalid).to_contain_text("未解析")


async def test_a_fact_added_in_the_panel_is_stored_as_a_manual_entry(tally: Tally) -> None:
    page = await tally.open_page()
    await page.get_by_test_id("memory-button").click()
    await expect(page.get_by_test_id("memory-list")).to_contain_text("Nothing remembered yet.")

    await page.get_by_test_id("memory-add").click()
    box = page.get_by_test_id("memory-add-input")
    await expect(box).to_be_focused()
    await box.fill("Keeps bees | two hives,\non the roof")
    await box.press("Enter")
    entry = page.get_by_test_id("memory-entry")
    await expect(entry).to_have_count(1)
    await expect(entry.get_by_test_id("memory-content")).to_have_text(
        "Keeps bees ¦ two hives, on the roof"
    )
    await expect(entry.get_by_test_id("memory-source")).to_have_text("manual")
    today = dt.datetime.now(dt.UTC).date().isoformat()
    await expect(entry.locator("time")).to_have_text(today)
    await expect(page.get_by_test_id("memory-add-form")).to_have_count(0)
    stored = (await tally.client.get("/api/memory")).json()
    assert [(e["source"], e["content"]) for e in stored["entries"]] == [
        ("manual", "Keeps bees ¦ two hives, on the roof")
    ]

    await page.get_by_test_id("memory-add").click()  # a refusal is shown in the form
    await page.get_by_test_id("memory-add-input").fill("a\x00b")
    await page.get_by_test_id("memory-add-save").click()
    error = page.get_by_test_id("memory-add-form").get_by_test_id("memory-error")
    await expect(error.get_by_test_id("error-code")).to_have_text("invalid_text")
    await expect(page.get_by_test_id("memory-add-input")).to_have_value("a\x00b")  # kept
    await page.get_by_test_id("memory-add-input").press("Escape")
    await expect(page.get_by_test_id("memory-add-form")).to_have_count(0)
    await expect(page.get_by_test_id("memory-panel")).to_be_visible()
    assert len((await tally.client.get("/api/memory")).json()["entries"]) == 1
    await tally.screenshot(page, "memory-added")


async def test_an_entry_a_newer_one_replaced_is_shown_struck_through(tally: Tally) -> None:
    old = "2026-01-02|manual|The user's phone number is 555-0100"
    first = (await tally.client.put("/api/memory", json={"content": old + "\n"})).json()
    old_id = first["entries"][0]["id"]
    new = f"2026-02-03|auto-summary>{old_id}|The user's phone number is 555-0199"
    await tally.client.put("/api/memory", json={"content": f"{old}\n{new}\n"})
    page = await tally.open_page()
    await page.get_by_test_id("memory-button").click()
    entries = page.get_by_test_id("memory-entry")
    await expect(entries).to_have_count(2)
    replaced = entries.filter(has_text="555-0100")
    await expect(replaced.get_by_test_id("memory-replaced")).to_have_text("replaced")
    await expect(
        entries.filter(has_text="555-0199").get_by_test_id("memory-replaced")
    ).to_have_count(0)
    decoration = await replaced.get_by_test_id("memory-content").evaluate(
        "el => getComputedStyle(el).textDecorationLine"
    )
    assert decoration == "line-through"
    await tally.screenshot(page, "memory-replaced")
