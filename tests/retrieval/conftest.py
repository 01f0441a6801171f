"""A memory scope to search: a migrated database (SQLite and PostgreSQL), sessions that say
things, and the Recall that finds them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest

from backend.domain.messages import UserInput
from backend.memory.entries import parse_document
from backend.memory.terms import search_terms
from backend.retrieval.embedders import BuiltinEmbedder, Embedder
from backend.retrieval.ranking import rank
from backend.retrieval.recall import Recall, Scope
from backend.retrieval.recollections import Recollection
from backend.storage.archive import ArchiveReader
from backend.storage.database import Database
from backend.storage.memory_vectors import VectorRepository
from backend.storage.messages import MessageRepository
from backend.storage.migrate import migrate
from backend.storage.sessions import SessionRepository
from backend.storage.tenants import TenantRepository

TENANT = Scope("default", "", None)  # memory.scope: tenant — every session of the tenant


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(database_url)
    await migrate(db)
    yield db
    await db.dispose()


@dataclass
class Archive:
    """Sessions saying things, and a Recall over them."""

    database: Database
    recall: Recall
    embedder: Embedder | None

    async def session(
        self, *lines: str, tenant_id: str = "default", user: str | None = None
    ) -> str:
        """A session in which the user said `lines` (each answered "Noted."); its id."""
        await TenantRepository(self.database).ensure(tenant_id=tenant_id)
        session = await SessionRepository(self.database).create(
            tenant_id=tenant_id, channel="api", user_key=user
        )
        await self.say(session.id, *lines, tenant_id=tenant_id)
        return session.id

    async def say(self, session_id: str, *lines: str, tenant_id: str = "default") -> None:
        """The user says `lines` in a session (each answered "Noted.")."""
        messages = MessageRepository(self.database)
        for line in lines:
            turn = f"turn-{line[:20]}-{len(line)}"
            await messages.add_user(
                tenant_id=tenant_id, session_id=session_id, turn_id=turn, user_input=UserInput(line)
            )
            await messages.add_reply(
                tenant_id=tenant_id,
                session_id=session_id,
                turn_id=turn,
                content="Noted.",
                status="complete",
            )

    async def find(
        self, query: str, *, scope: Scope = TENANT, memory: str = "", limit: int = 10
    ) -> list[Recollection]:
        index = await self.recall.refreshed(scope, parse_document(memory), self.embedder)
        vector = await self.recall.embed_query(query, self.embedder)
        ranked = rank(index, search_terms(query), vector, limit=limit, excluded=())
        gone = await self.recall.gone(scope, index, [item for item in ranked if item.is_turn])
        return [item for item in ranked if item.key not in gone]


def texts(found: Sequence[Recollection]) -> list[str]:
    return [item.text for item in found]


@pytest.fixture
async def archive(database: Database) -> AsyncIterator[Archive]:
    recall = Recall(archive=ArchiveReader(database), vectors=VectorRepository(database))
    database.notices.listen(recall)  # as composition wires it
    yield Archive(database, recall, BuiltinEmbedder())
    recall.close()
