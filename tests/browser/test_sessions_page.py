"""Sessions in the page: the list, the URL, the editable summary, archived messages."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Route, expect

from backend.domain.events import ProviderEvent
from backend.domain.requests import ChatRequest
from backend.providers.scripted import ScriptedProvider
from tests.browser.harness import Tally, last_reply, running_tally, send, wait_for_reply
from tests.fakes.summarizer import EchoSummarizer

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

TENANT = "default"  # auth.mode: none
SESSION_URL = re.compile(r"/api/chat/sessions/[^/?]+$")


@dataclass
class HeldProvider(ScriptedProvider):
    """Answers only once `answer` is set, so a test decides when a turn ends."""

    answer: asyncio.Event = field(default_factory=asyncio.Event)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        await self.answer.wait()
        async for event in super().stream(request):
            yield event


async def create_session(tally: Tally, title: str) -> dict[str, Any]:
    response = await tally.client.post(
        "/api/chat/sessions", json={"title": title, "channel": "web"}
    )
    assert response.status_code == 201
    return dict(response.json())


async def test_summary_edited_in_the_page_persists_after_reload(tally: Tally) -> None:
    session = await create_session(tally, "Planning the garden")
    page = await tally.open_page(f"/#/s/{session['id']}")
    await expect(page.get_by_test_id("chat-title")).to_have_text("Planning the garden")
    await expect(page.get_by_test_id("summary")).to_be_hidden()  # none yet: no card

    await page.get_by_test_id("summary-add").click()  # the header's "Add summary"
    await expect(page.get_by_test_id("summary-input")).to_be_focused()
    await page.get_by_test_id("summary-input").fill("Tomatoes go by the south wall.\nWater daily.")
    await page.get_by_test_id("summary-save").click()
    await expect(page.get_by_test_id("summary-text")).to_contain_text("south wall")
    await expect(page.get_by_test_id("summary-add")).to_be_hidden()  # the card edits it now

    await page.reload()
    await expect(page.get_by_test_id("summary-text")).to_have_text(
        "Tomatoes go by the south wall.\nWater daily."
    )
    stored = (await tally.client.get(f"/api/chat/sessions/{session['id']}")).json()
    assert stored["summary"] == "Tomatoes go by the south wall.\nWater daily."
    await tally.screenshot(page, "summary")

    await page.get_by_test_id("summary-edit").click()  # emptied: the card goes again
    await page.get_by_test_id("summary-input").fill("")
    await page.get_by_test_id("summary-save").click()
    await expect(page.get_by_test_id("summary")).to_be_hidden()
    await expect(page.get_by_test_id("summary-add")).to_be_visible()


async def test_summary_card_appears_only_once_the_session_has_a_summary(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push("First answer.", "Second answer.")
    session = await create_session(tally, "No summary yet")
    page = await tally.open_page(f"/#/s/{session['id']}")
    await send(page, "First question")
    await wait_for_reply(page)
    await expect(page.get_by_test_id("summary")).to_be_hidden()
    assert "none yet" not in await page.inner_text("main")

    # The summary arrives between turns (as the summarizer writes it, off the request path);
    # the page picks it up after the next turn, without a reload.
    put = await tally.client.put(
        f"/api/chat/sessions/{session['id']}/summary", json={"summary": "The reader asked twice."}
    )
    assert put.status_code == 200
    await send(page, "Second question")
    await wait_for_reply(page)
    await expect(page.get_by_test_id("summary-text")).to_have_text("The reader asked twice.")
    await expect(page.get_by_test_id("summary")).to_be_visible()
    await expect(page.get_by_test_id("summary-add")).to_be_hidden()
    await expect(page.get_by_test_id("user-message")).to_have_count(2)  # nothing was reloaded


async def test_summary_written_by_the_summarizer_appears_after_the_next_turn(
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
        page = await tally.open_page()
        for question in ("Tomatoes?", "Basil?", "Water?"):  # 6 messages: the window overflows
            provider.push("Noted.")
            await send(page, question)
            await wait_for_reply(page)
        await tally.app.state.services.runtimes.wait_idle()  # the summarizer has written
        provider.push("Noted again.")
        await send(page, "Compost?")
        await wait_for_reply(page)
        await expect(page.get_by_test_id("summary-text")).to_contain_text("The user sent")
        session_id = page.url.rsplit("/", 1)[-1]
        stored = (await tally.client.get(f"/api/chat/sessions/{session_id}")).json()
        await expect(page.get_by_test_id("summary-text")).to_have_text(stored["summary"])
        await tally.screenshot(page, "summary-from-summarizer")


async def test_archived_messages_appear_on_request_before_the_summary(
    tally: Tally, provider: ScriptedProvider
) -> None:
    provider.push("Apples are in season.", "Pears keep longer.")
    session = await create_session(tally, "Fruit")
    for question in ("Tell me about apples.", "And pears?"):
        reply = await tally.client.post(
            "/api/chat/send", json={"session_id": session["id"], "message": question}
        )
        assert reply.status_code == 200, reply.text
    window_start = reply.json()["user_message_id"]  # the first turn leaves the window
    await tally.app.state.services.sessions.update(
        tenant_id=TENANT,
        session_id=session["id"],
        window_start_id=window_start,
        summary="The reader asked about apples.",
    )
    page = await tally.open_page(f"/?session={session['id']}")  # the query form works too

    await expect(page.get_by_test_id("user-message")).to_have_count(1)
    await expect(page.get_by_test_id("summary-text")).to_have_text("The reader asked about apples.")
    await page.get_by_test_id("show-earlier").click()
    await expect(page.get_by_test_id("user-message")).to_have_count(2)
    archived = page.locator(".archived")
    await expect(archived).to_contain_text("Tell me about apples.")
    await expect(archived).to_contain_text("Apples are in season.")
    await expect(page.get_by_test_id("show-earlier")).to_have_count(0)
    assert "#/s/" in page.url
    await tally.screenshot(page, "earlier-messages")


async def test_sessions_are_listed_newest_first_renamed_searched_and_deleted(
    tally: Tally,
) -> None:
    for title in ("Alpha notes", "Beta notes", "Gamma plans"):
        await create_session(tally, title)
    page = await tally.open_page()
    items = page.get_by_test_id("session-item")
    await expect(items).to_have_text(["Gamma plans", "Beta notes", "Alpha notes"])

    await items.filter(has_text="Beta notes").locator(".session-link").click()
    await expect(page.get_by_test_id("chat-title")).to_have_text("Beta notes")
    await page.get_by_test_id("rename-session").click()
    title_box = page.locator(".chat-head .inline-input")
    await title_box.fill("Beta, renamed")
    await title_box.press("Enter")
    await expect(page.get_by_test_id("chat-title")).to_have_text("Beta, renamed")
    await expect(items).to_have_text(["Beta, renamed", "Gamma plans", "Alpha notes"])

    await page.get_by_test_id("session-search").fill("notes")
    await expect(items).to_have_text(["Alpha notes"])
    await page.get_by_test_id("session-search").fill("")
    await expect(items).to_have_count(3)

    beta = items.filter(has_text="Beta, renamed")
    await beta.get_by_role("button", name="Delete").click()
    await beta.get_by_role("button", name="Delete").click()  # the second click confirms
    await expect(items).to_have_text(["Gamma plans", "Alpha notes"])
    await expect(page.get_by_test_id("empty-state")).to_be_visible()  # its page closed
    listed = (await tally.client.get("/api/chat/sessions")).json()
    assert [s["title"] for s in listed["sessions"]] == ["Gamma plans", "Alpha notes"]

    box = page.get_by_test_id("input")
    await box.type("A brand new question")
    await box.press("Shift+Enter")  # a new line, not a send
    await box.type("on two lines")
    await expect(box).to_have_value("A brand new question\non two lines")
    await box.press("Enter")
    await wait_for_reply(page)
    await expect(items.first).to_have_text("A brand new question")  # titled by its first line
    await expect(page.get_by_test_id("user-message").locator(".bubble")).to_have_text(
        "A brand new question\non two lines"
    )
    await tally.screenshot(page, "sessions")


async def test_rename_box_in_the_header_survives_the_conversation_loading(tally: Tally) -> None:
    """The title (and its rename button) is drawn before the messages arrive; when they do,
    the page must not take the focus from the open rename box, which would close it."""
    session = await create_session(tally, "Slow to load")
    page = await tally.open_page()
    messages_released = asyncio.Event()

    async def hold_messages(route: Route) -> None:
        await messages_released.wait()
        await route.continue_()

    await page.route("**/api/chat/sessions/*/messages*", hold_messages)
    await page.get_by_test_id("session-item").locator(".session-link").click()
    await expect(page.get_by_test_id("chat-title")).to_have_text("Slow to load")
    await page.get_by_test_id("rename-session").click()
    title_box = page.locator(".chat-head .inline-input")
    await expect(title_box).to_be_focused()
    messages_released.set()
    await expect(page.locator(".thread .window")).to_be_attached()  # the messages are drawn
    await expect(title_box).to_be_focused()
    await title_box.fill("Loaded, renamed")
    await title_box.press("Enter")
    await expect(page.get_by_test_id("chat-title")).to_have_text("Loaded, renamed")
    stored = (await tally.client.get(f"/api/chat/sessions/{session['id']}")).json()
    assert stored["title"] == "Loaded, renamed"


async def test_sidebar_rename_and_delete_survive_a_list_refresh(
    tally: Tally, provider: ScriptedProvider
) -> None:
    """A turn that ends, or a search, redraws the list: a rename box open in it keeps its
    text, and a delete button armed by a first click still deletes on the second."""
    for title in ("Alpha notes", "Beta notes"):
        await create_session(tally, title)
    provider.delay_s = 0.05
    provider.push(" ".join(f"word{n}" for n in range(30)))
    page = await tally.open_page()
    items = page.get_by_test_id("session-item")
    await expect(items).to_have_count(2)

    await send(page, "A slow question")
    await expect(last_reply(page).locator(".md")).to_contain_text("word1")
    await expect(items).to_have_count(3)
    alpha = items.filter(has_text="Alpha notes")
    await alpha.hover()  # an item's buttons show on hover (or focus)
    await alpha.get_by_role("button", name="Rename").click()
    rename_box = page.locator(".session-list .inline-input")
    await rename_box.fill("Alpha, renamed")
    # The turn's end refreshes the list, then reads the session once the list is drawn.
    list_read = page.expect_response(lambda r: "/api/chat/sessions?" in r.url)
    session_read = page.expect_response(lambda r: SESSION_URL.search(r.url) is not None)
    async with list_read, session_read:
        await wait_for_reply(page)
    await expect(rename_box).to_have_value("Alpha, renamed")
    await expect(rename_box).to_be_focused()
    await rename_box.press("Enter")
    await expect(items.filter(has_text="Alpha, renamed")).to_have_count(1)

    beta = items.filter(has_text="Beta notes")
    await beta.hover()
    await beta.get_by_role("button", name="Delete").click()  # armed
    await page.get_by_test_id("session-search").fill("notes")  # the list is drawn again
    await expect(items).to_have_count(1)
    await beta.get_by_role("button", name="Delete").click()  # confirms
    await expect(items).to_have_count(0)
    listed = (await tally.client.get("/api/chat/sessions")).json()
    assert sorted(s["title"] for s in listed["sessions"]) == ["A slow question", "Alpha, renamed"]


async def test_a_bots_chat_is_listed_with_its_platform_badge_and_reads_like_any_session(
    tally: Tally,
) -> None:
    sessions = tally.app.state.services.sessions
    chat = await sessions.create(
        tenant_id=TENANT, channel="telegram", title="Ada on Telegram", external_key="tg:42"
    )
    await create_session(tally, "A web conversation")
    page = await tally.open_page("/")
    items = page.get_by_test_id("session-item")
    bot_item = items.filter(has_text="Ada on Telegram")
    await expect(bot_item.get_by_test_id("channel-badge")).to_have_text("Telegram")
    await expect(
        items.filter(has_text="A web conversation").get_by_test_id("channel-badge")
    ).to_have_count(0)
    await bot_item.get_by_role("link").click()
    await expect(page).to_have_url(re.compile(f"#/s/{chat.id}$"))
    await expect(page.get_by_test_id("chat-title")).to_have_text("Ada on Telegram")


async def test_a_reply_that_ends_while_its_conversation_loads_is_shown(
    browser: Browser, tmp_path: Path
) -> None:
    """Coming back to a conversation whose reply is streaming, the page loads its messages and
    draws the live reply again. When the turn ends while they load, the messages may predate
    the reply (the server had not stored it yet) and the live reply is gone with its turn: the
    page must load them again, not show the question unanswered (signing in and sending at once
    did this under load: the start-up redraw of the new chat raced its first turn)."""
    provider = HeldProvider(replies=["Done while you were away."])
    async with running_tally(browser, tmp_path, provider) as tally:
        page = await tally.open_page()
        await send(page, "Take your time")
        await expect(page.get_by_test_id("user-message")).not_to_have_attribute(
            "data-turn-id", ""
        )  # the turn started: the question is stored, the reply waits for `answer`
        await page.get_by_test_id("new-chat").click()
        await expect(page.get_by_test_id("empty-state")).to_be_visible()

        async def answer_while_loading(route: Route) -> None:
            """The messages without the reply, handed over once the page's turn has ended."""
            response = await route.fetch()
            provider.answer.set()
            await expect(page.get_by_test_id("stop")).to_be_hidden()  # the turn ended
            await route.fulfill(response=response)

        await page.route("**/api/chat/sessions/*/messages*", answer_while_loading, times=1)
        await page.get_by_test_id("session-item").locator(".session-link").click()
        await wait_for_reply(page)
        await expect(last_reply(page)).to_contain_text("Done while you were away.")
        await expect(page.get_by_test_id("user-message")).to_have_count(1)
