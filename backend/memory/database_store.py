"""MEMORY.md kept in the `memory_entries` table, for deployments with several hosts.

Invariants:
- One row per line of the document, in `id` order, filtered on (tenant_id, scope_key) always.
  An entry row holds its source kind in `source` and its provenance in its own columns. A line
  that is not an entry (comment, blank, invalid line kept from PUT /api/memory) is a row whose
  `source` is "" (no entry can have an empty source) with the line verbatim in `content`.
- `read().content` is the text the file store holds for the same operations: a document that
  does not start with a comment line is led by the same standard header a new file starts with.
- Writes to one scope are serialized (BEGIN IMMEDIATE on SQLite, a transaction-scoped advisory
  lock on PostgreSQL), so append_once's check and insert are one atomic step.
- Entry ids are row ids as strings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, Select, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.memory.base import (
    MemoryEntryNotFound,
    check_limit,
    check_scope,
    require_provenance,
)
from backend.memory.entries import (
    DocumentLine,
    EntryFields,
    MemoryDocument,
    MemoryEntry,
    NewEntry,
    Provenance,
    compose_source,
    normalise_replacement,
    parse_document,
    prepare_entry,
    split_source,
    split_supersedes,
    standard_header,
    utc_today,
    with_header,
)
from backend.memory.relevance import rank_entries
from backend.storage.database import Database
from backend.storage.locks import lock_in
from backend.storage.tables import memory_entries

VERBATIM_SOURCE = ""
_table = memory_entries
_MAX_ROW_ID = 10**18  # entry ids longer than this are not ours: not found, not an overflow


class DatabaseMemoryStore:
    """MemoryStore over `memory_entries` (see the module docstring for the invariants)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def read(self, *, tenant_id: str, scope_key: str) -> MemoryDocument:
        check_scope(tenant_id, scope_key)
        async with self._database.read() as conn:
            return await _load(conn, tenant_id, scope_key)

    async def append(
        self, *, tenant_id: str, scope_key: str, entries: Sequence[NewEntry]
    ) -> list[MemoryEntry]:
        check_scope(tenant_id, scope_key)
        today = utc_today()
        prepared = [prepare_entry(entry, today=today) for entry in entries]
        if not prepared:
            return []
        async with self._database.write() as conn:
            await self._lock_scope(conn, tenant_id, scope_key)
            return await _insert_entries(conn, tenant_id, scope_key, prepared)

    async def append_once(self, *, tenant_id: str, scope_key: str, entry: NewEntry) -> MemoryEntry:
        check_scope(tenant_id, scope_key)
        provenance = require_provenance(entry)
        fields = prepare_entry(entry, today=utc_today())
        async with self._database.write() as conn:
            await self._lock_scope(conn, tenant_id, scope_key)
            existing = await conn.execute(
                _select_scope(tenant_id, scope_key)
                .where(
                    _table.c.source != VERBATIM_SOURCE,
                    _table.c.session_id == provenance.session_id,
                    _table.c.first_message_id == provenance.first_message_id,
                    _table.c.last_message_id == provenance.last_message_id,
                )
                .limit(1)
            )
            row = existing.first()
            if row is not None:
                return _entry_from_row(row)
            return (await _insert_entries(conn, tenant_id, scope_key, [fields]))[0]

    async def delete(self, *, tenant_id: str, scope_key: str, entry_id: str) -> None:
        check_scope(tenant_id, scope_key)
        if not entry_id.isascii() or not entry_id.isdigit() or int(entry_id) >= _MAX_ROW_ID:
            raise MemoryEntryNotFound(entry_id)
        async with self._database.write() as conn:
            result = await conn.execute(
                delete(_table).where(
                    _table.c.tenant_id == tenant_id,
                    _table.c.scope_key == scope_key,
                    _table.c.id == int(entry_id),
                    _table.c.source != VERBATIM_SOURCE,
                )
            )
            if result.rowcount == 0:
                raise MemoryEntryNotFound(entry_id)

    async def replace(self, *, tenant_id: str, scope_key: str, content: str) -> MemoryDocument:
        check_scope(tenant_id, scope_key)
        document = parse_document(
            normalise_replacement(content, standard_header(tenant_id, scope_key))
        )
        now = dt.datetime.now(dt.UTC)
        rows = [_row_for_line(line, tenant_id, scope_key, now) for line in document.lines]
        async with self._database.write() as conn:
            await self._lock_scope(conn, tenant_id, scope_key)
            await conn.execute(
                delete(_table).where(
                    _table.c.tenant_id == tenant_id, _table.c.scope_key == scope_key
                )
            )
            await conn.execute(insert(_table), rows)  # never empty: the header is always there
            return await _load(conn, tenant_id, scope_key)

    async def search(
        self, *, tenant_id: str, scope_key: str, query: str, limit: int
    ) -> list[MemoryEntry]:
        check_limit(limit)
        document = await self.read(tenant_id=tenant_id, scope_key=scope_key)
        return rank_entries(document.current_entries, query, limit)

    async def recent(self, *, tenant_id: str, scope_key: str, limit: int) -> list[MemoryEntry]:
        check_limit(limit)
        document = await self.read(tenant_id=tenant_id, scope_key=scope_key)
        return list(document.current_entries[-limit:]) if limit else []

    async def _lock_scope(self, conn: AsyncConnection, tenant_id: str, scope_key: str) -> None:
        """Serialize writers of one scope. SQLite's BEGIN IMMEDIATE already serializes every
        writer; PostgreSQL's READ COMMITTED would let two append_once calls both miss."""
        await lock_in(conn, "tally.memory", tenant_id, scope_key)


def _select_scope(tenant_id: str, scope_key: str) -> Select[Any]:
    return (
        select(_table)
        .where(_table.c.tenant_id == tenant_id, _table.c.scope_key == scope_key)
        .order_by(_table.c.id)
    )


async def _load(conn: AsyncConnection, tenant_id: str, scope_key: str) -> MemoryDocument:
    result = await conn.execute(_select_scope(tenant_id, scope_key))
    lines = [_line_from_row(row) for row in result]
    return MemoryDocument(tuple(with_header(lines, standard_header(tenant_id, scope_key))))


async def _insert_entries(
    conn: AsyncConnection, tenant_id: str, scope_key: str, prepared: Sequence[EntryFields]
) -> list[MemoryEntry]:
    now = dt.datetime.now(dt.UTC)
    rows = [_row_for_entry(fields, tenant_id, scope_key, now) for fields in prepared]
    result = await conn.execute(
        insert(_table).returning(_table.c.id, sort_by_parameter_order=True), rows
    )
    return [
        MemoryEntry(id=str(row_id), date=fields.date, source=fields.source, content=fields.content)
        for row_id, fields in zip(result.scalars().all(), prepared, strict=True)
    ]


def _row_for_entry(
    fields: EntryFields, tenant_id: str, scope_key: str, now: dt.datetime
) -> dict[str, object]:
    provenance = fields.provenance
    row = _verbatim_row(fields.content, tenant_id, scope_key, now)
    # The kind column keeps the replaced ids after the kind (`kind>id,id`), as a line does.
    row.update(date=fields.date, source=compose_source(fields.kind, None, fields.supersedes))
    if provenance is not None:
        row.update(
            session_id=provenance.session_id,
            first_message_id=provenance.first_message_id,
            last_message_id=provenance.last_message_id,
        )
    return row


def _verbatim_row(text: str, tenant_id: str, scope_key: str, now: dt.datetime) -> dict[str, object]:
    """A row for a line that is not an entry; every row has every key, as executemany needs."""
    return {
        "tenant_id": tenant_id,
        "scope_key": scope_key,
        "date": now.date(),
        "source": VERBATIM_SOURCE,
        "content": text,
        "session_id": None,
        "first_message_id": None,
        "last_message_id": None,
        "created_at": now,
    }


def _row_for_line(
    line: DocumentLine, tenant_id: str, scope_key: str, now: dt.datetime
) -> dict[str, object]:
    if line.entry is None:
        return _verbatim_row(line.text, tenant_id, scope_key, now)
    kind, provenance = split_source(line.entry.source)
    supersedes = line.entry.supersedes
    fields = EntryFields(line.entry.date, kind, line.entry.content, provenance, supersedes)
    return _row_for_entry(fields, tenant_id, scope_key, now)


def _entry_from_row(row: Row[Any]) -> MemoryEntry:
    provenance = None
    if row.session_id is not None:
        provenance = Provenance(row.session_id, row.first_message_id, row.last_message_id)
    kind, supersedes = split_supersedes(row.source)
    return MemoryEntry(
        id=str(row.id),
        date=row.date,
        source=compose_source(kind, provenance, supersedes),
        content=row.content,
    )


def _line_from_row(row: Row[Any]) -> DocumentLine:
    if row.source == VERBATIM_SOURCE:
        return DocumentLine(row.content)
    entry = _entry_from_row(row)
    return DocumentLine(entry.line, entry)
