"""The composition root: builds every service from settings; `create_app` serves them."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from backend.api import chat, health, memory, sessions
from backend.api.deps import Services
from backend.api.errors import install_error_handlers
from backend.api.limits import BodySizeLimit
from backend.chat.budget import Budget
from backend.chat.compiler import ModelLimits
from backend.chat.failpoints import Failpoints
from backend.chat.memory_context import MemoryContext
from backend.chat.memory_tools import MemorySearchTool, MemoryWriteTool
from backend.chat.overflow import OverflowPolicy, OverflowWorker
from backend.chat.prompts import PromptRenderer
from backend.chat.request_builder import RequestBuilder, RequestSettings
from backend.chat.summarizer import Summarizer, SummaryModel
from backend.chat.tokens import TokenCounter
from backend.chat.turn import TurnRunner
from backend.chat.turn_lock import SessionLocks
from backend.chat.window import WindowPolicy
from backend.errors import ConfigError
from backend.memory.base import MemoryStore
from backend.memory.database_store import DatabaseMemoryStore
from backend.memory.file_store import FileMemoryStore
from backend.providers.base import ChatProvider
from backend.providers.registry import build_chat_provider
from backend.providers.scripted import ScriptedProvider
from backend.settings import ModelSettings, Settings
from backend.storage.database import Database
from backend.storage.messages import MessageRepository
from backend.storage.migrate import migrate
from backend.storage.overflow_jobs import OverflowJobRepository
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


def build_memory_store(settings: Settings, database: Database) -> MemoryStore:
    if settings.memory.store == "database":
        return DatabaseMemoryStore(database)
    return FileMemoryStore(Path(settings.memory.path), Path(settings.data_dir))


def build_summarizer(
    settings: Settings, provider: ChatProvider, model: ModelSettings, prompts: PromptRenderer
) -> tuple[Summarizer, list[ChatProvider]]:
    """The summarizer's own model when configured, falling back to the chat model."""
    chat_model = SummaryModel(provider, model.name)
    own = settings.summarizer
    if own.provider is None or own.name is None:
        return Summarizer([chat_model], prompts), []
    own_provider = build_chat_provider(
        settings.providers, ModelSettings(provider=own.provider, name=own.name)
    )
    return Summarizer([SummaryModel(own_provider, own.name), chat_model], prompts), [own_provider]


@asynccontextmanager
async def build_services(
    settings: Settings,
    *,
    extra_tools: Iterable[Tool] = (),
    provider: ChatProvider | None = None,
    summarizer_provider: ChatProvider | None = None,
) -> AsyncIterator[Services]:
    """Open the database (migrated), the providers, memory, the turn runner and the overflow
    worker (resuming unfinished jobs); close them all after."""
    prompts = PromptRenderer(settings.prompts_dir)
    prompts.check(settings.persona.system_template)
    if provider is not None:
        model, is_demo = settings.model or DEMO_MODEL, False
    else:
        provider, model, is_demo = choose_provider(settings)
    database = Database(settings.database.url)
    owned: list[ChatProvider] = [provider]
    try:
        await migrate(database)
        store = build_memory_store(settings, database)
        summarizer, extra_providers = build_summarizer(
            settings, summarizer_provider or provider, model, prompts
        )
        owned += extra_providers
        services = _assemble(
            settings, database, provider, model, prompts, store, summarizer, extra_tools, is_demo
        )
        if services.overflow is not None:
            await services.overflow.resume()
        try:
            yield services
        finally:
            await services.turns.aclose()
            if services.overflow is not None:
                await services.overflow.aclose()
    finally:
        for owned_provider in owned:
            await owned_provider.aclose()
        await database.dispose()


def _assemble(
    settings: Settings,
    database: Database,
    provider: ChatProvider,
    model: ModelSettings,
    prompts: PromptRenderer,
    store: MemoryStore,
    summarizer: Summarizer,
    extra_tools: Iterable[Tool],
    is_demo: bool,
) -> Services:
    memory = settings.memory
    scope_by_user = memory.scope == "user"
    sessions = SessionRepository(database)
    messages = MessageRepository(database)
    tool_conversations = ToolConversationRepository(database)
    jobs = OverflowJobRepository(database)
    counter = TokenCounter(model.name)
    budget = Budget(
        context_window=model.context_window,
        max_output_tokens=model.max_output_tokens,
        normal_ratio=settings.compaction.normal_ratio,
        emergency_ratio=settings.compaction.emergency_ratio,
    )
    tools = ToolRegistry.from_names(
        settings.tools.enabled,
        available=[
            MemorySearchTool(store, scope_by_user=scope_by_user),
            MemoryWriteTool(store, scope_by_user=scope_by_user),
            *extra_tools,
        ],
        timeout_s=settings.tools.timeout_s,
    )
    builder = RequestBuilder(
        messages=messages,
        prompts=prompts,
        tools=tools,
        memory=MemoryContext(store, counter, budget_tokens=memory.prompt_budget_tokens),
        counter=counter,
        settings=RequestSettings(
            persona=settings.persona,
            model=ModelLimits(
                model.name, model.max_output_tokens, model.temperature, model.supports_vision
            ),
            budget=budget,
            scope_by_user=scope_by_user,
        ),
        clock=lambda: datetime.now(UTC),
    )
    # The demo provider would "summarize" into its own canned text: no memory from it.
    overflow = (
        None
        if is_demo
        else _overflow_worker(settings, jobs, sessions, messages, store, summarizer, budget)
    )
    turns = TurnRunner(
        sessions=sessions,
        messages=messages,
        tool_conversations=tool_conversations,
        locks=SessionLocks(database),
        provider=provider,
        builder=builder,
        tools=tools,
        counter=counter,
        max_tool_iterations=settings.tools.max_tool_iterations,
        after_turn=overflow.after_turn if overflow is not None else None,
    )
    return Services(
        settings=settings,
        database=database,
        sessions=sessions,
        messages=messages,
        tool_conversations=tool_conversations,
        memory=store,
        overflow_jobs=jobs,
        turns=turns,
        overflow=overflow,
        provider_name=model.provider,
        model_name=model.name,
        is_demo=is_demo,
    )


def _overflow_worker(
    settings: Settings,
    jobs: OverflowJobRepository,
    sessions: SessionRepository,
    messages: MessageRepository,
    store: MemoryStore,
    summarizer: Summarizer,
    budget: Budget,
) -> OverflowWorker:
    memory = settings.memory
    policy = OverflowPolicy(
        window=WindowPolicy(
            max_messages=settings.persona.max_history_messages,
            batch=memory.overflow_batch,
            normal_token_limit=budget.normal_limit,
        ),
        auto_min_messages=memory.auto_summarize.min_messages,
        auto_min_chars=memory.auto_summarize.min_chars,
        delete_evicted=memory.delete_evicted,
        scope_by_user=memory.scope == "user",
        language=settings.persona.language,
        retry_base_s=memory.retry_base_s,
    )
    return OverflowWorker(
        jobs=jobs,
        sessions=sessions,
        messages=messages,
        memory=store,
        summarizer=summarizer,
        policy=policy,
        failpoints=Failpoints.from_environment(),
    )


def create_app(
    settings: Settings,
    *,
    extra_tools: Iterable[Tool] = (),
    provider: ChatProvider | None = None,
    summarizer_provider: ChatProvider | None = None,
) -> FastAPI:
    if settings.auth.mode != "none":
        raise ConfigError("auth.mode: keys is not built yet; use auth.mode: none (loopback)")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with build_services(
            settings,
            extra_tools=extra_tools,
            provider=provider,
            summarizer_provider=summarizer_provider,
        ) as services:
            app.state.services = services
            if services.is_demo:
                log.warning("demo mode: replies come from the built-in demo provider")
            yield

    app = FastAPI(title="Tally", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.server.max_body_bytes)
    for router in (health.router, sessions.router, chat.router, memory.router):
        app.include_router(router)
    if FRONTEND.is_dir():
        app.mount("/", StaticFiles(directory=FRONTEND, html=True), name="frontend")
    return app
