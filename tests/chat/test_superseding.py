"""Facts that change (issue 13, item 6): "my phone number is now …" replaces the line that held
the old number instead of sitting beside it. The summarizer is shown the current lines the new
turns may change; the prompt then carries only the current fact; the old line stays in
MEMORY.md, unchanged (a revert of the new line brings it back: tests/memory)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from backend.app import create_app
from backend.domain.events import Finished, ProviderEvent, TextDelta
from backend.domain.requests import ChatRequest
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.prompt_text import prompt_text

OLD, NEW = "555-0100", "555-0199"
LABEL = re.compile(r"^\[(L\d+)\] .*phone number", re.MULTILINE)


@dataclass
class PhoneSummarizer:
    """Remembers the phone number the new user messages give; a new one replaces the line
    with the old, which the prompt shows it labelled."""

    name: str = "phone-summarizer"
    prompts: list[str] = field(default_factory=list)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        prompt = request.messages[-1].content
        self.prompts.append(prompt)
        number = re.search(r"\[new\] user: My phone number is (?:now )?([\d-]+)", prompt)
        label = LABEL.search(prompt)
        if number is None:
            memory = "NOTHING TO RECORD"
        elif label is not None:
            memory = f"- (replaces {label[1]}) The user's phone number is {number[1]}"
        else:
            memory = f"- The user's phone number is {number[1]}"
        yield TextDelta(f"## Memory\n{memory}\n\n## Summary\nTalked about phones.")
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


async def test_a_changed_fact_replaces_the_old_one_in_the_prompt(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2},
    )
    chat = ScriptedProvider(replies=["ok"])
    summarizer = PhoneSummarizer()
    app = create_app(settings, provider=chat, summarizer_provider=summarizer)
    turns = [f"My phone number is {OLD}", "hello", "hi", f"My phone number is now {NEW}"]
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for text in [*turns, "a", "b", "c"]:  # the last three push the new number out
            await client.post("/api/chat/send", json={"session_id": session_id, "message": text})
            await app.state.services.runtimes.wait_idle()
        await client.post("/api/chat/send", json={"message": "What is my phone number?"})
        asked = prompt_text(chat.requests[-1])
        entries = (await client.get("/api/memory")).json()["entries"]
    assert NEW in asked and OLD not in asked  # only the current fact reaches the model
    assert [(e["content"], e["is_current"]) for e in entries] == [
        (f"The user's phone number is {OLD}", False),
        (f"The user's phone number is {NEW}", True),
    ]  # the old line is kept, unchanged: the new one names it
    assert entries[1]["replaces"] == [entries[0]["id"]]
    assert any("[L1] The user's phone number is 555-0100" in p for p in summarizer.prompts)
