"""The summarizer call: sections parsed, unformatted answers kept, identifiers never lost."""

from __future__ import annotations

import datetime as dt
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.chat.prompts import PromptRenderer
from backend.chat.summarizer import Summarizer, SummaryFailed, SummaryModel, parse_output
from backend.domain.messages import Role, StoredMessage
from backend.errors import ProviderUnavailable
from backend.memory.entries import MemoryEntry
from backend.providers.scripted import ScriptedProvider
from tests.conftest import ROOT


def message(message_id: int, role: Role, content: str) -> StoredMessage:
    return StoredMessage(
        id=message_id,
        session_id="s",
        role=role,
        content=content,
        turn_id=f"t{message_id}",
        status="complete",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


EVICTED = [
    message(1, "user", "Hi, my name is Ada Lovelace and my email is ada@example.org"),
    message(2, "assistant", "Nice to meet you, Ada."),
    message(3, "user", "My order ORD-7781 weighs 12 kg."),
    message(4, "assistant", "Noted."),
]


def summarizer(*models: ScriptedProvider) -> Summarizer:
    return Summarizer(
        [SummaryModel(m, f"model-{i}") for i, m in enumerate(models)],
        PromptRenderer(ROOT / "prompts"),
    )


async def summarize(s: Summarizer, model: SummaryModel, language: str = "en") -> object:
    return await s.summarize(
        model, messages=EVICTED, memory_from_id=1, previous_summary="", language=language
    )


def test_sections_are_parsed_and_nothing_to_record_is_recognised() -> None:
    facts, summary = parse_output("## Memory\n- a fact\n- another\n\n## Summary\nWe talked.")
    assert facts == ("a fact", "another") and summary == "We talked."
    assert parse_output("## Memory\nNothing to record.\n## Summary\nx")[0] == ()
    assert parse_output("## 记忆\n无需记录\n## 摘要\n闲聊")[0] == ()


def test_an_answer_that_ignores_the_format_is_still_used() -> None:
    facts, summary = parse_output("The user is Ada;\nshe likes tea.")
    assert facts == ("The user is Ada; she likes tea.",)
    assert summary == "The user is Ada;\nshe likes tea."


async def test_dropped_identifiers_are_asked_for_again_then_kept_verbatim() -> None:
    model = ScriptedProvider()
    model.push(
        "## Memory\n- The user is Ada Lovelace.\n## Summary\nIntroductions.",
        "## Memory\n- Ada Lovelace, ada@example.org\n## Summary\nIntroductions and an order.",
    )
    s = summarizer(model)
    output = await s.summarize(
        s.model_for(0, retries_per_model=3),
        messages=EVICTED,
        memory_from_id=1,
        previous_summary="",
        language="en",
    )
    retry_prompt = model.requests[1].messages[0].content
    assert "dropped these identifiers" in retry_prompt and "ORD-7781" in retry_prompt
    assert output.facts[-1] == "kept verbatim: ORD-7781, 12 kg"
    for identifier in ("Ada Lovelace", "ada@example.org", "ORD-7781", "12 kg"):
        assert identifier in output.memory_text
    assert output.summary == "Introductions and an order."


async def test_failures_and_empty_answers_raise_summary_failed() -> None:
    model = ScriptedProvider()
    model.push(ProviderUnavailable("m", "HTTP 500"), "")
    s = summarizer(model)
    for _ in range(2):
        with pytest.raises(SummaryFailed):
            await summarize(s, s.model_for(0, retries_per_model=3))


def test_after_its_retries_the_summarizer_falls_back_to_the_next_model() -> None:
    own, chat = ScriptedProvider(name="own"), ScriptedProvider(name="chat")
    s = summarizer(own, chat)
    assert [s.model_for(a, retries_per_model=3).provider.name for a in range(5)] == [
        "own",
        "own",
        "own",
        "chat",
        "chat",
    ]


async def test_chinese_sessions_use_the_chinese_prompt() -> None:
    model = ScriptedProvider()
    model.push("## Memory\n无需记录\n## Summary\n打招呼。")
    s = summarizer(model)
    output = await summarize(s, s.model_for(0, retries_per_model=3), language="zh")
    assert "你负责维护" in model.requests[0].messages[0].content
    assert output.facts == () and output.summary == "打招呼。"


async def test_the_summarizers_instructions_come_from_the_prompts_folder(tmp_path: Path) -> None:
    own = tmp_path / "prompts"
    shutil.copytree(ROOT / "prompts", own)
    (own / "overflow_summary_system.md.j2").write_text("Keep only what matters to the user.\n")
    older = tmp_path / "older"  # as an older `tally init` wrote it: no system template
    shutil.copytree(ROOT / "prompts", older)
    (older / "overflow_summary_system.md.j2").unlink()
    shipped = (ROOT / "prompts" / "overflow_summary_system.md.j2").read_text(encoding="utf-8")
    systems = []
    for folder in (own, older):
        model = ScriptedProvider(replies=["## Memory\n- Ada\n## Summary\nHello."])
        s = Summarizer([SummaryModel(model, "m")], PromptRenderer(folder))
        s.check_template("en")
        await summarize(s, s.model_for(0, retries_per_model=3))
        systems.append(model.requests[0].system)
    assert systems[0] == "Keep only what matters to the user."
    assert systems[1] == shipped.split("-#}", 1)[1].strip()


async def test_the_summarizer_is_shown_current_facts_and_a_fact_can_replace_them() -> None:
    model = ScriptedProvider()
    model.push(
        "## Memory\n- (replaces L1) The user's phone number is 555-0199\n"
        "- (replaces L9) a label no fact has\n## Summary\nA new number."
    )
    s = summarizer(model)
    current = [
        MemoryEntry("e1", dt.date(2026, 1, 1), "manual", "The user likes tea"),
        MemoryEntry(
            "e2", dt.date(2026, 1, 1), "manual", "The user is Ada; Ada's phone number is 555-0100"
        ),
    ]
    output = await s.summarize(
        s.model_for(0, retries_per_model=3),
        messages=[message(5, "user", "My phone number is now 555-0199")],
        memory_from_id=5,
        previous_summary="",
        language="en",
        replaceable=current,
    )
    prompt = model.requests[0].messages[0].content
    assert "[L1] Ada's phone number is 555-0100" in prompt  # the facts about what it says
    assert "likes tea" not in prompt  # a fact that shares no word with the turns
    assert output.supersedes == ("e2.2",)  # that fact of its line, not the line
    assert output.facts == ("The user's phone number is 555-0199", "a label no fact has")
