"""The demo summarizer keeps what the user said about themselves, with no model call."""

from __future__ import annotations

from datetime import UTC, datetime

from backend.chat.demo_summarizer import DemoSummarizer
from backend.chat.prompts import PromptRenderer
from backend.domain.messages import Role, StoredMessage
from backend.memory.entries import MemoryEntry
from backend.providers.demo import DemoProvider
from tests.conftest import ROOT


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


TURNS = [
    message(1, "user", "Hello there. My name is Ada and I live in Lisbon!"),
    message(2, "assistant", "Nice to meet you, Ada."),
    message(3, "user", "What is the weather like? Remember that I fly on 12 May."),
    message(4, "assistant", "Sunny."),
    message(5, "user", "Write to ada@example.com please"),
    message(6, "assistant", "Noted."),
]


def summarizer() -> DemoSummarizer:
    return DemoSummarizer(DemoProvider(), PromptRenderer(ROOT / "prompts"))


async def test_it_keeps_sentences_about_the_user_and_the_identifiers_they_gave() -> None:
    demo = summarizer()
    output = await demo.summarize(
        demo.model_for(0, retries_per_model=3),
        messages=TURNS,
        memory_from_id=1,
        previous_summary="",
        language="en",
    )
    assert output.facts == (
        "The user said: “My name is Ada and I live in Lisbon!”",
        "The user said: “Remember that I fly on 12 May.”",
        "The user mentioned ada@example.com",
    )
    assert "Hello there" not in output.memory_text and "weather" not in output.memory_text
    assert output.summary.splitlines() == [
        "- The user said: “Hello there. My name is Ada and I live in Lisbon!”",
        "- The user said: “What is the weather like? Remember that I fly on 12 May.”",
        "- The user said: “Write to ada@example.com please”",
    ]


async def test_already_distilled_turns_only_refresh_the_summary() -> None:
    demo = summarizer()
    output = await demo.summarize(
        demo.model_for(0, retries_per_model=3),
        messages=TURNS,
        memory_from_id=7,  # the automatic write distilled all of them already
        previous_summary="Met Ada.",
        language="en",
    )
    assert output.facts == ()
    assert output.summary.splitlines()[0] == "Met Ada."


async def test_small_talk_leaves_nothing_to_record() -> None:
    demo = summarizer()
    output = await demo.summarize(
        demo.model_for(0, retries_per_model=3),
        messages=[message(1, "user", "What a lovely day."), message(2, "assistant", "It is.")],
        memory_from_id=1,
        previous_summary="",
        language="en",
    )
    assert output.facts == () and output.memory_text == ""


async def test_a_fact_that_changed_replaces_that_fact_of_its_line() -> None:
    demo = summarizer()
    old = MemoryEntry(
        "a1b2c3d4e5f6",
        datetime.now(UTC).date(),
        "auto-summary@s1:1-2",
        "The user said: “My name is Ada.”; The user said: “My phone number is 555-0100.”",
    )
    unrelated = MemoryEntry("0a0b0c0d0e0f", datetime.now(UTC).date(), "manual", "Likes tea")
    output = await demo.summarize(
        demo.model_for(0, retries_per_model=3),
        messages=[
            message(5, "user", "My phone number is 555-0150."),  # taken back at once
            message(6, "assistant", "Ok."),
            message(7, "user", "Correction: my phone number is actually 555-0199."),
            message(8, "assistant", "Ok."),
        ],
        memory_from_id=5,
        previous_summary="",
        language="en",
        replaceable=[unrelated, old],
    )
    assert output.supersedes == ("a1b2c3d4e5f6.2",)  # its second fact; the name still holds
    assert "555-0199" in output.memory_text
    assert "555-0150" not in output.memory_text and "555-0100" not in output.memory_text
