"""FastAPI dependencies as named types: the services of the app and the calling tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from backend.chat.overflow import OverflowWorker
from backend.chat.turn import TurnRunner
from backend.memory.base import MemoryStore
from backend.settings import Settings
from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import OverflowJobRepository
from backend.storage.sessions import SessionRepository
from backend.storage.tool_conversations import ToolConversationRepository


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    database: Database
    sessions: SessionRepository
    messages: MessageRepository
    tool_conversations: ToolConversationRepository
    memory: MemoryStore
    overflow_jobs: OverflowJobRepository
    turns: TurnRunner
    overflow: OverflowWorker | None
    provider_name: str
    model_name: str
    is_demo: bool


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def current_tenant(_request: Request) -> str:
    """With `auth.mode: none` every caller is the `default` tenant (loopback only)."""
    return "default"


ServicesDep = Annotated[Services, Depends(get_services)]
TenantDep = Annotated[str, Depends(current_tenant)]
