"""The composition root: builds every service from settings; `create_app` serves them."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from backend.api import chat, health, sessions
from backend.api.deps import Services
from backend.api.errors import install_error_handlers
from backend.api.limits import BodySizeLimit
from backend.chat.compiler import ModelLimits
from backend.chat.prompts import PromptRenderer
from backend.chat.turn import TurnRunner, TurnSettings
from backend.chat.turn_lock import SessionLocks
from backend.errors import ConfigError
from backend.providers.base import ChatProvider
from backend.providers.registry import build_chat_provider
from backend.providers.scripted import ScriptedProvider
from backend.settings import ModelSettings, Settings
from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.migrate import migrate
from backend.storage.sessions import SessionRepository
from backend.storage.tool_conversations import ToolConversationRepository
from backend.tools.base import Tool
from backend.tools.registry import ToolRegistry

log = logging.getLogger("tally")

FRONTEND = Path(__file__).resolve().parent.parent / "frontend"
DEMO_MODEL = ModelSettings(provider="demo", name="tally-demo")


def choose_provider(settings: Settings) -> tuple[ChatProvider, ModelSettings, bool]:
    """The configured model's provider chain, or the demo provider when no key is set."""
    model = settings.model
    if model is None:
        return ScriptedProvider(name="demo"), DEMO_MODEL, True
    provider_settings = settings.providers[model.provider]
    if provider_settings.api_key_env and not provider_settings.api_key():
        log.warning(
            "%s is not set: answering with the built-in demo provider, not %s",
            provider_settings.api_key_env,
            model.name,
        )
        return ScriptedProvider(name="demo"), DEMO_MODEL, True
    return build_chat_provider(settings.providers, model), model, False


@asynccontextmanager
async def build_services(
    settings: Settings,
    *,
    extra_tools: Iterable[Tool] = (),
    provider: ChatProvider | None = None,
) -> AsyncIterator[Services]:
    """Open the database (migrated), the provider and the turn runner; close them after."""
    prompts = PromptRenderer(settings.prompts_dir)
    prompts.check(settings.persona.system_template)
    tools = ToolRegistry.from_names(
        settings.tools.enabled, extra=extra_tools, timeout_s=settings.tools.timeout_s
    )
    if provider is not None:
        model, is_demo = settings.model or DEMO_MODEL, False
    else:
        provider, model, is_demo = choose_provider(settings)
    database = Database(settings.database.url)
    try:
        await migrate(database)
        services = _assemble(settings, database, provider, model, prompts, tools, is_demo)
        try:
            yield services
        finally:
            await services.turns.aclose()
    finally:
        await provider.aclose()
        await database.dispose()


def _assemble(
    settings: Settings,
    database: Database,
    provider: ChatProvider,
    model: ModelSettings,
    prompts: PromptRenderer,
    tools: ToolRegistry,
    is_demo: bool,
) -> Services:
    sessions = SessionRepository(database)
    messages = MessageRepository(database)
    tool_conversations = ToolConversationRepository(database)
    turns = TurnRunner(
        sessions=sessions,
        messages=messages,
        tool_conversations=tool_conversations,
        locks=SessionLocks(database),
        provider=provider,
        prompts=prompts,
        tools=tools,
        settings=TurnSettings(
            persona=settings.persona,
            model=ModelLimits(
                name=model.name,
                max_output_tokens=model.max_output_tokens,
                temperature=model.temperature,
            ),
            max_tool_iterations=settings.tools.max_tool_iterations,
        ),
    )
    return Services(
        settings=settings,
        database=database,
        sessions=sessions,
        messages=messages,
        tool_conversations=tool_conversations,
        turns=turns,
        provider_name=model.provider,
        model_name=model.name,
        is_demo=is_demo,
    )


def create_app(
    settings: Settings,
    *,
    extra_tools: Iterable[Tool] = (),
    provider: ChatProvider | None = None,
) -> FastAPI:
    if settings.auth.mode != "none":
        raise ConfigError("auth.mode: keys is not built yet; use auth.mode: none (loopback)")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with build_services(settings, extra_tools=extra_tools, provider=provider) as s:
            app.state.services = s
            if s.is_demo:
                log.warning("demo mode: replies come from the built-in demo provider")
            yield

    app = FastAPI(title="Tally", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.server.max_body_bytes)
    for router in (health.router, sessions.router, chat.router):
        app.include_router(router)
    if FRONTEND.is_dir():
        app.mount("/", StaticFiles(directory=FRONTEND, html=True), name="frontend")
    return app
