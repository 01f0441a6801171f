"""Memory routes: the caller's MEMORY.md, its entries, search, add, delete and revert."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from backend.api.auth import TenantDep
from backend.api.deps import ServicesDep
from backend.api.schemas import (
    MemoryEntryCreate,
    MemoryEntryList,
    MemoryEntryPublic,
    MemoryPublic,
    MemoryUpdate,
    ProvenancePublic,
    RevertResponse,
)
from backend.api.text_fields import Text
from backend.chat.revert import revert_line
from backend.errors import InvalidInput
from backend.memory.entries import MemoryDocument, MemoryEntry, NewEntry, neutralise

router = APIRouter(prefix="/api/memory", tags=["memory"])

UserScope = Annotated[
    Text, Query(alias="user", max_length=200, description="end user (memory.scope: user)")
]

MAX_MANUAL_ENTRY_CHARS = 2_000
MANUAL_KIND = "manual"


def entry_public(entry: MemoryEntry, *, is_current: bool = True) -> MemoryEntryPublic:
    provenance = entry.provenance
    return MemoryEntryPublic(
        id=entry.id,
        date=entry.date,
        source=entry.writer,
        origin=entry.origin,
        content=entry.content,
        replaces=list(entry.supersedes),
        is_current=is_current,
        provenance=None
        if provenance is None
        else ProvenancePublic(
            session_id=provenance.session_id,
            first_message_id=provenance.first_message_id,
            last_message_id=provenance.last_message_id,
        ),
    )


def memory_public(document: MemoryDocument) -> MemoryPublic:
    current = {entry.id for entry in document.current_entries}
    return MemoryPublic(
        content=document.content,
        entries=[entry_public(e, is_current=e.id in current) for e in document.entries],
        invalid_lines=[line for _, line in document.invalid_lines],
    )


@router.get("")
async def read_memory(
    services: ServicesDep, tenant_id: TenantDep, user: UserScope = ""
) -> MemoryPublic:
    return memory_public(await services.memory.read(tenant_id=tenant_id, scope_key=user))


@router.put("")
async def replace_memory(
    body: MemoryUpdate, services: ServicesDep, tenant_id: TenantDep, user: UserScope = ""
) -> MemoryPublic:
    document = await services.memory.replace(
        tenant_id=tenant_id, scope_key=user, content=body.content
    )
    return memory_public(document)


@router.get("/entries")
async def search_entries(
    services: ServicesDep,
    tenant_id: TenantDep,
    q: Annotated[Text, Query(max_length=500)] = "",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    user: UserScope = "",
) -> MemoryEntryList:
    if q.strip():
        entries = await services.memory.search(
            tenant_id=tenant_id, scope_key=user, query=q, limit=limit
        )
    else:
        entries = await services.memory.recent(tenant_id=tenant_id, scope_key=user, limit=limit)
    return MemoryEntryList(entries=[entry_public(e) for e in entries])


def checked_entry_content(content: str) -> str:
    """`content` of an entry written by hand, refused with a clear code when it cannot be one
    (text that cannot be stored is refused by the schema, `api/text_fields.py`)."""
    if len(content) > MAX_MANUAL_ENTRY_CHARS:
        raise InvalidInput(
            f"a memory entry has at most {MAX_MANUAL_ENTRY_CHARS} characters; "
            f"this one has {len(content)}",
            code="memory_entry_too_long",
        )
    if not neutralise(content):
        raise InvalidInput("the entry is empty", code="empty_memory_entry")
    return content


@router.post("/entries", status_code=201)
async def add_entry(
    body: MemoryEntryCreate, services: ServicesDep, tenant_id: TenantDep, user: UserScope = ""
) -> MemoryEntryPublic:
    """Remember one fact by hand: source `manual`, dated today (UTC), neutralised to one line."""
    content = checked_entry_content(body.content)
    (entry,) = await services.memory.append(
        tenant_id=tenant_id,
        scope_key=user,
        entries=[NewEntry(source=MANUAL_KIND, content=content)],
    )
    return entry_public(entry)


@router.delete("/entries/{entry_id}", status_code=204)
async def delete_entry(
    entry_id: str, services: ServicesDep, tenant_id: TenantDep, user: UserScope = ""
) -> Response:
    await services.memory.delete(tenant_id=tenant_id, scope_key=user, entry_id=entry_id)
    return Response(status_code=204)


@router.post("/entries/{entry_id}/revert")
async def revert_entry(
    entry_id: str, services: ServicesDep, tenant_id: TenantDep, user: UserScope = ""
) -> RevertResponse:
    """Undo the summary that wrote this entry: the entry goes, and its turns return to the
    conversation (its latest eviction) or are distilled again from the stored messages."""
    reverted = await revert_line(
        tenant_id=tenant_id,
        scope_key=user,
        entry_id=entry_id,
        memory=services.memory,
        jobs=services.overflow_jobs,
        messages=services.messages,
        sessions=services.sessions,
    )
    if not reverted.is_returned_to_window:
        runtime = await services.runtimes.get(tenant_id)
        runtime.overflow.resume_session(tenant_id, reverted.session_id)
    return RevertResponse(
        session_id=reverted.session_id, returned_to_window=reverted.is_returned_to_window
    )
