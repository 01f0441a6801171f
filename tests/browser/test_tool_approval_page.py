"""The chat page asks before a tool that needs approval runs: Approve and Deny on its card."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Locator, Page, Route, expect

from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.browser.harness import (
    Tally,
    keep_for_readme,
    last_reply,
    running_tally,
    send,
    wait_for_reply,
)

# The shared browser lives in the session's event loop (see harness.py).
pytestmark = pytest.mark.asyncio(loop_scope="session")

# Generous: this machine is busy, and a turn waits for the model and the server.
WAIT_MS = 60_000
CONTENT = "# Plan\n\n- book the train\n"
WRITE = ToolCall(
    id="c1", name="write_file", arguments={"path": "notes/plan.md", "content": CONTENT}
)


def tool_settings(*, timeout_s: float = 300.0) -> dict[str, Any]:
    """The workspace's real `write_file`, which runs only once a person approves it."""
    return {
        "enabled": ["now"],
        "workspace": {"enabled": True},
        "approval": {"required": ["write_file"], "timeout_s": timeout_s},
    }


@asynccontextmanager
async def approving_tally(
    browser: Browser, tmp_path: Path, provider: ScriptedProvider, *, timeout_s: float = 300.0
) -> AsyncIterator[Tally]:
    async with running_tally(
        browser, tmp_path, provider, tools=tool_settings(timeout_s=timeout_s)
    ) as tally:
        yield tally


def written_file(tmp_path: Path) -> Path:
    """Where `write_file` puts notes/plan.md for the tenant `default`."""
    return tmp_path / "data" / "workspaces" / "default" / "notes" / "plan.md"


def told_the_model(provider: ScriptedProvider) -> str:
    """The tool result the model read in the request after the call."""
    (result,) = [m for m in provider.requests[-1].messages if m.role == "tool"]
    return result.content


async def waiting_card(page: Page) -> Locator:
    """The card of the call, once it asks for a decision."""
    card = page.get_by_test_id("tool-card")
    await expect(card).to_have_attribute("data-state", "approval", timeout=WAIT_MS)
    return card


async def test_approved_call_runs_and_writes_the_file(
    browser: Browser, provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.push(ScriptedToolCalls([WRITE]), "I saved the plan in notes/plan.md.")
    async with approving_tally(browser, tmp_path, provider) as tally:
        page = await tally.open_page()
        await send(page, "Save my travel plan")

        card = await waiting_card(page)
        await expect(card.get_by_test_id("tool-approval")).to_contain_text(
            "Waiting for your approval"
        )
        await expect(card).to_contain_text("denied automatically in 5 min")
        await expect(card.get_by_test_id("tool-approve")).to_be_enabled()
        await expect(card.get_by_test_id("tool-deny")).to_be_enabled()
        assert not written_file(tmp_path).exists()  # nothing runs before the decision
        shot = tally.shots / "approval-card.png"
        await card.screenshot(path=shot)
        keep_for_readme(shot, "approval.png")
        await card.screenshot(path=tally.shots / "waiting-card.png")

        await card.get_by_test_id("tool-approve").click()
        await wait_for_reply(page)
        await expect(card).to_have_attribute("data-state", "ok", timeout=WAIT_MS)
        await expect(card.locator(".tool-result")).to_have_text(
            f"wrote {len(CONTENT.encode())} bytes to notes/plan.md"
        )
        await expect(card.get_by_test_id("tool-approve")).to_have_count(0)
        await expect(last_reply(page)).to_contain_text("I saved the plan")
        assert written_file(tmp_path).read_text() == CONTENT
        assert told_the_model(provider).startswith("wrote ")

        # Stored calls are drawn as before: a finished card, with nothing to decide.
        await page.reload()
        card = page.get_by_test_id("tool-card")
        await expect(card).to_have_attribute("data-state", "ok", timeout=WAIT_MS)
        await expect(card).to_contain_text("wrote ")
        await expect(page.get_by_test_id("tool-approval")).to_have_count(0)
        await tally.screenshot(page, "approved")


async def test_denied_call_never_runs_and_the_card_fails(
    browser: Browser, provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.push(ScriptedToolCalls([WRITE]), "All right, I did not save it.")
    async with approving_tally(browser, tmp_path, provider) as tally:
        page = await tally.open_page()
        await send(page, "Save my travel plan")

        card = await waiting_card(page)
        await card.get_by_test_id("tool-deny").click()
        await wait_for_reply(page)
        await expect(card).to_have_attribute("data-state", "error", timeout=WAIT_MS)
        await expect(card.locator(".tool-result")).to_have_text(
            "error: the user denied this call; it did not run"
        )
        await expect(card.locator(".tool-status")).to_contain_text("failed")
        await expect(card.get_by_test_id("tool-approval")).to_have_count(0)
        await expect(last_reply(page)).to_contain_text("I did not save it.")
        assert not written_file(tmp_path).exists()
        assert "denied" in told_the_model(provider)
        await tally.screenshot(page, "denied")


async def test_unanswered_call_is_denied_when_its_time_runs_out(
    browser: Browser, provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.push(ScriptedToolCalls([WRITE]), "No one approved, so nothing was saved.")
    async with approving_tally(browser, tmp_path, provider, timeout_s=1) as tally:
        page = await tally.open_page()
        await send(page, "Save my travel plan")

        card = page.get_by_test_id("tool-card")
        await expect(card).to_have_attribute("data-state", "error", timeout=WAIT_MS)
        await expect(card.locator(".tool-result")).to_have_text(
            "error: no one approved this call within 1 s; it did not run"
        )
        await expect(card.get_by_test_id("tool-approve")).to_have_count(0)
        await wait_for_reply(page)
        assert not written_file(tmp_path).exists()
        await tally.screenshot(page, "timed-out")


async def test_a_decision_that_fails_to_send_can_be_sent_again(
    browser: Browser, provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.push(ScriptedToolCalls([WRITE]), "Saved.")
    async with approving_tally(browser, tmp_path, provider) as tally:
        page = await tally.open_page()
        await send(page, "Save my travel plan")
        card = await waiting_card(page)

        async def unavailable(route: Route) -> None:
            body = {"error": {"code": "unavailable", "message": "the server is restarting"}}
            await route.fulfill(status=503, json=body)

        await page.route("**/api/chat/turns/*/approvals", unavailable)
        await card.get_by_test_id("tool-approve").click()
        await expect(card).to_contain_text("the server is restarting", timeout=WAIT_MS)
        await expect(card.get_by_test_id("tool-approve")).to_be_enabled()
        await expect(card).to_have_attribute("data-state", "approval")
        assert not written_file(tmp_path).exists()

        await page.unroute("**/api/chat/turns/*/approvals")
        await card.get_by_test_id("tool-approve").click()
        await wait_for_reply(page)
        await expect(card).to_have_attribute("data-state", "ok", timeout=WAIT_MS)
        assert written_file(tmp_path).read_text() == CONTENT


async def test_a_call_no_longer_waiting_says_so_on_the_card(
    browser: Browser, provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.push(ScriptedToolCalls([WRITE]), "Not saved.")
    async with approving_tally(browser, tmp_path, provider) as tally:
        page = await tally.open_page()
        await send(page, "Save my travel plan")
        card = await waiting_card(page)

        async def answered_elsewhere(route: Route) -> None:
            body = {"error": {"code": "approval_not_found", "message": "nothing waits"}}
            await route.fulfill(status=404, json=body)

        await page.route("**/api/chat/turns/*/approvals", answered_elsewhere)
        await card.get_by_test_id("tool-approve").click()
        await expect(card.get_by_test_id("tool-decision")).to_have_text(
            "This call was no longer waiting for a decision.", timeout=WAIT_MS
        )
        await expect(card.get_by_test_id("tool-approve")).to_have_count(0)

        # Someone else (another tab, a chat) denies it: the result still reaches the card.
        turn_id = await last_reply(page).get_attribute("data-turn-id")
        response = await tally.client.post(
            f"/api/chat/turns/{turn_id}/approvals", json={"tool_call_id": "c1", "approved": False}
        )
        assert response.status_code == 200
        await wait_for_reply(page)
        await expect(card).to_have_attribute("data-state", "error", timeout=WAIT_MS)
        assert not written_file(tmp_path).exists()
