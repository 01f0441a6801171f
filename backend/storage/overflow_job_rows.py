"""A summarizer job as the journal holds it (`overflow_jobs`), and its row read back (the
summarizer's words made storable, `domain/text.py`, as they are written)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Row

from backend.domain.text import storable_text
from backend.storage.timestamps import aware_or_none

JobKind = Literal["overflow", "auto"]
ACTIVE = ("pending", "summarized", "memory_written")


@dataclass(frozen=True, slots=True)
class OverflowJob:
    id: int
    tenant_id: str
    session_id: str
    scope_key: str
    kind: JobKind
    first_message_id: int
    last_message_id: int
    next_start_id: int
    memory_from_id: int
    status: str
    previous_summary: str
    summary: str | None
    memory_line: str | None
    memory_entry_id: str | None
    attempts: int
    next_attempt_at: datetime | None
    memory_supersedes: tuple[str, ...] = ()  # entry ids the memory line replaces
    origin: str | None = None  # where its turns were said; None for jobs from before 0007


def storable_or_none(text: str | None) -> str | None:
    return None if text is None else storable_text(text)


def job_from_row(row: Row[Any]) -> OverflowJob:
    return OverflowJob(
        id=row.id,
        tenant_id=row.tenant_id,
        session_id=row.session_id,
        scope_key=row.scope_key,
        kind=row.kind,
        first_message_id=row.first_message_id,
        last_message_id=row.last_message_id,
        next_start_id=row.next_start_id,
        memory_from_id=row.memory_from_id,
        status=row.status,
        previous_summary=storable_text(row.previous_summary or ""),
        summary=storable_or_none(row.summary),
        memory_line=storable_or_none(row.memory_line),
        memory_entry_id=row.memory_entry_id,
        attempts=row.attempts,
        next_attempt_at=aware_or_none(row.next_attempt_at),
        memory_supersedes=tuple(filter(None, (row.memory_supersedes or "").split(","))),
        origin=row.origin,
    )
