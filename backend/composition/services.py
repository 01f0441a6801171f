"""The application's services, built once by the composition root and handed to every entry
point (the HTTP routes, the commands, the chat channels)."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.chat.linking import Linking
from backend.chat.memory_health import MemoryHealth
from backend.chat.quiet_sessions import QuietSessions
from backend.chat.runtime import RuntimeRegistry
from backend.chat.service import ChatService
from backend.chat.turn import TurnRunner
from backend.coordination.base import Coordinator
from backend.memory.linked_scopes import PersonalMemory
from backend.memory.proposals import MemoryProposals
from backend.providers.outcomes import ProviderOutcomes
from backend.retrieval.embedders import EmbedderPool
from backend.settings import Settings
from backend.storage.admin_operations import AdminOperationRepository
from backend.storage.audit import AuditLog
from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import OverflowJobRepository
from backend.storage.sessions import SessionRepository
from backend.storage.tenants import ApiKeyRepository, TenantRepository
from backend.storage.tool_conversations import ToolConversationRepository
from backend.storage.usage import UsageRepository
from backend.tenancy.keys import Authenticator
from backend.tools.mcp_tools import McpServers


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    database: Database
    sessions: SessionRepository
    messages: MessageRepository
    tool_conversations: ToolConversationRepository
    memory: PersonalMemory  # the configured store, keyed by person
    overflow_jobs: OverflowJobRepository
    tenants: TenantRepository
    api_keys: ApiKeyRepository
    runtimes: RuntimeRegistry
    turns: TurnRunner
    chat: ChatService  # the one entry for every turn
    authenticator: Authenticator
    usage: UsageRepository
    coordinator: Coordinator
    memory_health: MemoryHealth
    linking: Linking  # one person across channels
    proposals: MemoryProposals  # lines waiting for a person's confirmation
    audit: AuditLog  # what administrators did
    operations: AdminOperationRepository  # long administrative operations, their progress
    quiet_sessions: QuietSessions  # distils the tails of sessions that went quiet
    provider_outcomes: ProviderOutcomes = field(default_factory=ProviderOutcomes)
    mcp: McpServers = field(default_factory=McpServers)  # every tenant's MCP connections
    embedders: EmbedderPool = field(default_factory=EmbedderPool)  # those the tenants name
