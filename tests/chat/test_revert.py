"""Revert at the shipped defaults (window 50, automatic write at 30 messages): every line a
summarizer wrote can be reverted, the automatic write's included, in any order; each range is
distilled again once, and no turn is ever in memory twice. (The latest eviction's turns return
to the window instead: tests/api/test_memory_api.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.domain.events import ProviderEvent, TextDelta
from backend.domain.requests import ChatRequest
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.fakes.summarizer import EchoSummarizer

TURNS = 200


@dataclass
class MarkingSummarizer(EchoSummarizer):
    """EchoSummarizer, whose lines say `again` once `is_again` is set: a line distilled anew
    is told from the one it replaced (the file store's ids are made of a line's text)."""

    is_again: bool = False

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        async for event in super().stream(request):
            if self.is_again and isinstance(event, TextDelta):
                event = TextDelta(event.text.replace("- user said:", "- again, user said:"))
            yield event


def ranges(entries: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [
        (e["provenance"]["first_message_id"], e["provenance"]["last_message_id"]) for e in entries
    ]


def covered(entries: list[dict[str, Any]]) -> list[int]:
    return [i for first, last in ranges(entries) for i in range(first, last + 1)]


async def entries_of(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = (await client.get("/api/memory")).json()["entries"]
    return entries


@pytest.mark.slow
async def test_every_summarizer_line_of_a_long_conversation_can_be_reverted_once(
    database_url: str, tmp_path: Path
) -> None:
    summarizer = MarkingSummarizer()
    app = create_app(
        make_settings(database_url, tmp_path),
        provider=ScriptedProvider(replies=["noted"]),
        summarizer_provider=summarizer,
    )
    outcomes = []
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for turn in range(TURNS):
            sent = await client.post(
                "/api/chat/send", json={"session_id": session_id, "message": f"fact {turn}"}
            )
            assert sent.status_code == 200, sent.text
            await app.state.services.runtimes.wait_idle()
        before = await entries_of(client)
        calls_before = summarizer.calls
        summarizer.is_again = True
        for entry in before:
            reverted = await client.post(f"/api/memory/entries/{entry['id']}/revert")
            assert reverted.status_code == 200, reverted.text
            outcomes.append(reverted.json()["returned_to_window"])
            await app.state.services.runtimes.wait_idle()
        after = await entries_of(client)
    # At the defaults the automatic write distills every turn before it is evicted.
    assert {e["source"] for e in before} == {"auto-summary"}
    assert len(before) >= 10
    assert not any(outcomes)  # the turns are in the window or archived: distilled again
    redistilled = ranges(before)
    assert summarizer.calls - calls_before == len(redistilled)  # each distilled again, once
    assert sorted(ranges(after)) == sorted(redistilled)
    assert all(e["content"].startswith("again, user said:") for e in after)  # every line new
    assert len(covered(after)) == len(set(covered(after))), "a turn is in memory twice"
