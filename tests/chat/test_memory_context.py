"""Which memory lines reach the model: the standing ones (all facts when they fit, else the
most recent, for the system prompt) do not depend on the message, so the prompt's start stays
cacheable; the ones picked for the message travel with it; all within one budget."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.chat.memory_context import MemoryContext, Retrieval
from backend.chat.tokens import TokenCounter
from backend.memory.file_store import FileMemoryStore
from backend.retrieval.embedders import BuiltinEmbedder
from backend.retrieval.recall import Recall
from backend.settings import DatabaseSettings
from backend.storage.archive import ArchiveReader
from backend.storage.database import open_database
from backend.storage.memory_vectors import VectorRepository
from backend.storage.migrate import migrate

FACTS = 40
BUDGET = 300  # tokens: room for about a dozen lines of ~20 tokens


@pytest.fixture
async def recall(tmp_path: Path) -> AsyncIterator[Recall]:
    database = open_database(DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path / 't.db'}"))
    await migrate(database)
    recall = Recall(archive=ArchiveReader(database), vectors=VectorRepository(database))
    yield recall
    recall.close()
    await database.dispose()


def context(
    tmp_path: Path, recall: Recall, *, budget: int = BUDGET
) -> tuple[MemoryContext, TokenCounter]:
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
    retrieval = Retrieval(recall, BuiltinEmbedder(), standing_share=0.5)
    return MemoryContext(store, counter, budget_tokens=budget, retrieval=retrieval), counter


async def test_standing_lines_are_the_newest_and_the_same_for_any_message(
    tmp_path: Path, recall: Recall
) -> None:
    memory, counter = context(tmp_path, recall)

    first = await memory.lines(tenant_id="default", scope_key="", query="topic3 please")
    second = await memory.lines(tenant_id="default", scope_key="", query="what about topic7?")

    assert first.standing == second.standing  # the system prompt's part: message-independent
    assert first.standing and first.standing[-1].endswith("word39")  # the newest, in file order
    assert "word3" in " ".join(first.relevant) and "word7" in " ".join(second.relevant)
    assert not set(first.relevant) & set(first.standing)  # never sent twice
    standing_cost = sum(counter.count(line) + 1 for line in first.standing)
    assert standing_cost <= BUDGET // 2  # its share; the rest for the lines picked for it
    total = sum(counter.count(line) + 1 for line in [*first.standing, *first.relevant])
    assert total <= BUDGET


async def test_a_message_about_a_standing_fact_adds_nothing_to_its_context(
    tmp_path: Path, recall: Recall
) -> None:
    memory, _ = context(tmp_path, recall)

    lines = await memory.lines(tenant_id="default", scope_key="", query="topic39")

    assert any(line.endswith("word39") for line in lines.standing)
    assert not any(line.endswith("word39") for line in lines.relevant)


async def test_when_all_of_memory_fits_it_all_stands_and_nothing_is_picked(
    tmp_path: Path, recall: Recall
) -> None:
    memory, _ = context(tmp_path, recall, budget=2000)

    lines = await memory.lines(tenant_id="default", scope_key="", query="topic3 please")

    assert len(lines.standing) == FACTS  # every fact, in the cached part of the prompt
    assert lines.relevant == [] and lines.earlier == []


async def test_a_line_repeating_most_words_of_one_chosen_is_left_out_and_others_are_not(
    tmp_path: Path, recall: Recall
) -> None:
    memory = tmp_path / "MEMORY.md"
    memory.write_text(
        "2026-01-02|manual|my phone number is 555 1234\n"
        "2026-01-03|manual|My phone number is 555 9876.\n"  # three of its four words repeated
        "2026-01-04|manual|my phone is a Fairphone 4\n"  # one of three
        "2026-01-05|manual|my phone number is 555 1234\n",  # word for word
        encoding="utf-8",
    )
    store = FileMemoryStore(memory, tmp_path / "data")
    retrieval = Retrieval(recall, BuiltinEmbedder(), standing_share=0.0)
    context = MemoryContext(
        store, TokenCounter("gpt-4o-mini"), budget_tokens=2000, retrieval=retrieval
    )

    lines = await context.lines(tenant_id="default", scope_key="", query="my phone number?")

    numbers = [line for line in lines.relevant if "number" in line]
    assert len(numbers) == 1 and numbers[0].endswith(("555 1234", "555 9876."))
    assert any(line.endswith("Fairphone 4") for line in lines.relevant)
