"""FastAPI dependencies as named types: the services of the app and the calling tenant."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from backend.chat.runtime import RuntimeRegistry
from backend.chat.turn import TurnRunner
from backend.memory.base import MemoryStore
from backend.providers.outcomes import ProviderOutcomes
from backend.settings import Settings
from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import OverflowJobRepository
from backend.storage.sessions import SessionRepository
from backend.storage.tenants import ApiKeyRepository, TenantRepository
from backend.storage.tool_conversations import ToolConversationRepository
from backend.storage.usage import UsageRepository
from backend.tenancy.keys import Authenticator
from backend.tenancy.quotas import RequestRateLimiter


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    database: Database
    sessions: SessionRepository
    messages: MessageRepository
    tool_conversations: ToolConversationRepository
    memory: MemoryStore
    overflow_jobs: OverflowJobRepository
    tenants: TenantRepository
    api_keys: ApiKeyRepository
    runtimes: RuntimeRegistry
    turns: TurnRunner
    authenticator: Authenticator
    rate_limiter: RequestRateLimiter
    usage: UsageRepository
    provider_outcomes: ProviderOutcomes = field(default_factory=ProviderOutcomes)


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
