"""Which memory lines reach the model: the standing ones (the most recent, for the system
prompt) do not depend on the message, so the prompt's start stays cacheable; the ones picked
for the message travel with it; both within one budget."""

from __future__ import annotations

from pathlib import Path

from backend.chat.memory_context import MemoryContext
from backend.chat.tokens import TokenCounter
from backend.memory.file_store import FileMemoryStore

FACTS = 40
BUDGET = 300  # tokens: room for about a dozen lines of ~20 tokens


def context(tmp_path: Path) -> tuple[MemoryContext, TokenCounter]:
    memory = tmp_path / "MEMORY.md"
    memory.write_text(
        "".join(
            f"2026-01-{1 + n % 28:02d}|manual|the code word for topic{n} is word{n}\n"
            for n in range(FACTS)
        ),
        encoding="utf-8",
    )
    counter = TokenCounter("gpt-4o-mini")
    store = FileMemoryStore(memory, tmp_path / "data")
    return MemoryContext(store, counter, budget_tokens=BUDGET), counter


async def test_standing_lines_are_the_newest_and_the_same_for_any_message(tmp_path: Path) -> None:
    memory, counter = context(tmp_path)

    first = await memory.lines(tenant_id="default", scope_key="", query="topic3 please")
    second = await memory.lines(tenant_id="default", scope_key="", query="what about topic7?")

    assert first.standing == second.standing  # the system prompt's part: message-independent
    assert first.standing and first.standing[-1].endswith("word39")  # the newest, in file order
    assert "word3" in " ".join(first.relevant) and "word7" in " ".join(second.relevant)
    assert not set(first.relevant) & set(first.standing)  # never sent twice
    standing_cost = sum(counter.count(line) + 1 for line in first.standing)
    assert standing_cost <= BUDGET // 2  # half is kept for the lines picked for the message
    total = sum(counter.count(line) + 1 for line in [*first.standing, *first.relevant])
    assert total <= BUDGET


async def test_a_message_about_a_standing_fact_adds_nothing_to_its_context(
    tmp_path: Path,
) -> None:
    memory, _ = context(tmp_path)

    lines = await memory.lines(tenant_id="default", scope_key="", query="topic39")

    assert any(line.endswith("word39") for line in lines.standing)
    assert not any(line.endswith("word39") for line in lines.relevant)
