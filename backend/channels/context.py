"""What a channel's bots use of the application: the chat service for turns, and the few
repositories their commands read (sessions, memory) and their delivery journal."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.chat.failpoints import Failpoints
from backend.chat.linking import Linking
from backend.chat.runtime import RuntimeRegistry
from backend.chat.service import ChatService
from backend.memory.base import MemoryStore
from backend.memory.proposals import MemoryProposals
from backend.storage.channel_updates import ChannelUpdateRepository
from backend.storage.database import Database
from backend.storage.sessions import SessionRepository


@dataclass(frozen=True, slots=True)
class ChannelServices:
    chat: ChatService
    sessions: SessionRepository
    memory: MemoryStore
    runtimes: RuntimeRegistry
    updates: ChannelUpdateRepository
    linking: Linking
    proposals: MemoryProposals
    failpoints: Failpoints = field(default_factory=Failpoints)  # crash tests only
    database: Database | None = None  # None: one process (tests of one bot): always the leader
    update_lease_s: float = 30.0  # how long a dead process's update waits to be taken over

    async def memory_scope(self, tenant_id: str, user_key: str | None) -> str:
        """The memory a chat's user reads: theirs with `memory.scope: user`, else the tenant's."""
        runtime = await self.runtimes.get(tenant_id)
        return (user_key or "") if runtime.settings.memory.scope == "user" else ""
