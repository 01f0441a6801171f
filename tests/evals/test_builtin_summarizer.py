"""`--summarizer builtin`: DemoSummarizer's rules behind the real Summarizer, which renders the
prompt the rules read back, parses their answer and applies the lines they replace."""

from __future__ import annotations

from datetime import UTC, date, datetime

from backend.chat.builtin_summary_model import BuiltinSummaryModel
from backend.chat.prompts import PromptRenderer
from backend.chat.summarizer import Summarizer, SummaryModel
from backend.domain.messages import Role, StoredMessage
from backend.memory.entries import MemoryEntry
from tests.conftest import ROOT

PROMPTS = PromptRenderer(ROOT / "prompts")


def message(message_id: int, role: Role, content: str) -> StoredMessage:
    return StoredMessage(
        id=message_id,
        session_id="s1",
        role=role,
        content=content,
        turn_id=f"t{message_id}",
        status="complete",
        created_at=datetime.now(UTC),
    )


def summarizer() -> Summarizer:
    return Summarizer([SummaryModel(BuiltinSummaryModel(PROMPTS), "any")], PROMPTS)


async def test_the_new_messages_become_facts_and_the_known_ones_only_summary() -> None:
    messages = [
        message(1, "user", "My sister's name is Priya."),
        message(2, "assistant", "Noted."),
        message(3, "user", "My work email is r.okafor@example.com"),
        message(4, "assistant", "Noted."),
    ]
    output = await summarizer().summarize(
        SummaryModel(BuiltinSummaryModel(PROMPTS), "any"),
        messages=messages,
        memory_from_id=3,
        previous_summary="- Earlier: the user said hello.",
        language="en",
    )
    assert "r.okafor@example.com" in output.memory_text
    assert "Priya" not in output.memory_text  # already in memory: [known] in the prompt
    assert output.summary.startswith("- Earlier: the user said hello.")
    assert "Priya" in output.summary


async def test_a_changed_fact_replaces_the_line_the_prompt_shows() -> None:
    old = MemoryEntry(
        id="e1",
        date=date(2026, 1, 2),
        source="auto-overflow",
        content="The user said: “My weight is 72 kg.”",
    )
    model = SummaryModel(BuiltinSummaryModel(PROMPTS), "any")
    output = await summarizer().summarize(
        model,
        messages=[
            message(1, "user", "Update: my weight is now 70 kg."),
            message(2, "assistant", "Noted."),
        ],
        memory_from_id=1,
        previous_summary="",
        language="en",
        replaceable=[old],
    )
    assert output.supersedes == ("e1",)
    assert "70 kg" in output.memory_text and "72 kg" not in output.memory_text
