"""Prompt-build time with a large MEMORY.md: part of `tally bench`.

Builds one turn's request in-process, as the server does, from a 10,000-line MEMORY.md and a
50-message window, with memory ranked by words and by the built-in embedding model, and
reports the median and p99 over repeated builds (each for another message).
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from backend.chat.budget import Budget
from backend.chat.compiler import ModelLimits
from backend.chat.memory_context import MemoryContext, Retrieval
from backend.chat.prompts import PromptRenderer
from backend.chat.request_builder import RequestBuilder, RequestSettings
from backend.chat.tokens import TokenCounter
from backend.domain.messages import Role, Session, StoredMessage
from backend.domain.tenants import DEFAULT_TENANT
from backend.memory.entries import format_line
from backend.memory.file_store import FileMemoryStore
from backend.retrieval.embedders import BuiltinEmbedder
from backend.retrieval.recall import Recall
from backend.settings import DatabaseSettings, PersonaSettings
from backend.storage.archive import ArchiveReader
from backend.storage.database import open_database
from backend.storage.memory_vectors import VectorRepository
from backend.storage.migrate import migrate
from backend.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LINES = 10_000
WINDOW = 50
TOPICS = ("tea", "trains", "Kyoto", "invoices", "Rust", "gardening", "chess", "mortgage", "piano")


def _memory_text() -> str:
    start = date(2024, 1, 1)
    lines = ["# benchmark memory"]
    for i in range(MEMORY_LINES):
        topic = TOPICS[i % len(TOPICS)]
        fact = f"fact {i}: the user mentioned {topic} and a detail numbered {i * 7}"
        lines.append(format_line(start + timedelta(days=i % 700), "auto-overflow", fact))
    return "\n".join(lines) + "\n"


def _window() -> list[StoredMessage]:
    now = datetime.now(UTC)
    roles: tuple[Role, Role] = ("user", "assistant")
    return [
        StoredMessage(
            id=i + 1,
            session_id="bench",
            role=roles[i % 2],
            content=f"message {i} about {TOPICS[i % len(TOPICS)]} " * 8,
            turn_id=f"t{i // 2}",
            status="complete",
            created_at=now,
            token_count=60,
        )
        for i in range(WINDOW)
    ]


async def _measure(folder: Path, builds: int) -> list[float]:
    memory_path = folder / "MEMORY.md"
    memory_path.write_text(_memory_text(), encoding="utf-8")
    database = open_database(DatabaseSettings(url=f"sqlite+aiosqlite:///{folder / 'bench.db'}"))
    await migrate(database)
    recall = Recall(archive=ArchiveReader(database), vectors=VectorRepository(database))
    counter = TokenCounter("gpt-4o-mini")
    builder = RequestBuilder(
        prompts=PromptRenderer(ROOT / "prompts"),
        tools=ToolRegistry.from_names(["now"]),
        memory=MemoryContext(
            FileMemoryStore(memory_path, folder / "data"),
            counter,
            budget_tokens=2000,
            retrieval=Retrieval(recall, BuiltinEmbedder()),
        ),
        counter=counter,
        settings=RequestSettings(
            persona=PersonaSettings(),
            model=ModelLimits("gpt-4o-mini", 4096),
            budget=Budget(128_000, 4096, 0.70, 0.95),
            scope_by_user=False,
        ),
        clock=lambda: datetime.now(UTC),
    )
    session = Session(
        id="bench",
        tenant_id=DEFAULT_TENANT,
        channel="api",
        title="",
        summary="The user plans a trip and keeps asking about tea. " * 10,
        window_start_id=0,
        created_at=datetime.now(UTC),
        updated_at=datetime.now(UTC),
    )
    window = _window()
    try:
        await builder.build(session, window)  # the first build indexes MEMORY.md once
        timings = []
        for build in range(builds):
            asked = dataclasses.replace(window[-1], content=_question(build))
            started = time.perf_counter()
            await builder.build(session, [*window[:-1], asked])
            timings.append((time.perf_counter() - started) * 1000)
        return timings
    finally:
        recall.close()
        await database.dispose()


def _question(build: int) -> str:
    topic = TOPICS[build % len(TOPICS)]
    return f"What did I say about {topic} and the detail numbered {build * 7 % 70_000}?"


def measure_prompt_build(builds: int = 100) -> dict[str, float]:
    """Median and p99 milliseconds of one prompt build (10,000 memory lines, 50 messages)."""
    with tempfile.TemporaryDirectory() as folder:
        timings = sorted(asyncio.run(_measure(Path(folder), builds)))
    return {
        "memory_lines": MEMORY_LINES,
        "window_messages": WINDOW,
        "p50_ms": round(statistics.median(timings), 2),
        "p99_ms": round(timings[min(len(timings) - 1, int(len(timings) * 0.99))], 2),
    }
