"""The memory tools: the model reads (`memory_search`) and writes (`memory_write`) long-term
memory of the calling tenant (and end user, with `memory.scope: user`), nobody else's."""

from __future__ import annotations

from backend.memory.base import MemoryStore
from backend.memory.entries import NewEntry, format_line
from backend.memory.proposals import Confirmation
from backend.tools.base import ToolContext, ToolFailed

MAX_FACT_CHARS = 500


def _scope_key(context: ToolContext, *, scope_by_user: bool) -> str:
    return (context.user_key or "") if scope_by_user else ""


class MemorySearchTool:
    name = "memory_search"
    description = (
        "Search long-term memory (facts remembered from earlier conversations). "
        "Returns matching lines `date|source|fact`, best first."
    )
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words to look for"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, store: MemoryStore, *, scope_by_user: bool) -> None:
        self._store = store
        self._scope_by_user = scope_by_user

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        query = str(arguments.get("query") or "").strip()
        if not query:
            raise ToolFailed("query must not be empty")
        limit = arguments.get("limit", 8)
        entries = await self._store.search(
            tenant_id=context.tenant_id,
            scope_key=_scope_key(context, scope_by_user=self._scope_by_user),
            query=query,
            limit=max(1, min(int(limit) if isinstance(limit, int) else 8, 20)),
        )
        if not entries:
            return "no matching memory"
        return "\n".join(format_line(e.date, e.source_kind, e.current_content) for e in entries)


class MemoryWriteTool:
    name = "memory_write"
    description = (
        "Remember one durable fact for future conversations (a preference, a name, a decision). "
        "One short sentence; do not store secrets."
    )
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {"fact": {"type": "string", "description": "the fact, one sentence"}},
        "required": ["fact"],
        "additionalProperties": False,
    }

    def __init__(
        self, store: MemoryStore, *, scope_by_user: bool, confirmation: Confirmation | None = None
    ) -> None:
        self._store = store
        self._scope_by_user = scope_by_user
        self._confirmation = confirmation

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        fact = " ".join(str(arguments.get("fact") or "").split())
        if not fact:
            raise ToolFailed("fact must not be empty")
        if len(fact) > MAX_FACT_CHARS:
            raise ToolFailed(f"a fact is at most {MAX_FACT_CHARS} characters")
        new = NewEntry(source=context.chat or "memory_write", content=fact)
        scope_key = _scope_key(context, scope_by_user=self._scope_by_user)
        if self._confirmation is not None and scope_key:  # a line about a person: theirs to allow
            await self._confirmation.propose(
                tenant_id=context.tenant_id,
                user_key=scope_key,
                session_id=context.session_id,
                entry=new,
            )
            return f"proposed to the user, kept once they confirm it: {fact}"
        (entry,) = await self._store.append(
            tenant_id=context.tenant_id, scope_key=scope_key, entries=[new]
        )
        return f"remembered: {entry.line}"
