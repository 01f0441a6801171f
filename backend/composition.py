"""Composition: builds every service from settings, and each tenant's runtime."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from backend.api.auth import DEFAULT_TENANT
from backend.channel_settings import ChannelSettings
from backend.channels.bot_runner import check_bots
from backend.chat.budget import Budget
from backend.chat.compiler import ModelLimits
from backend.chat.demo_summarizer import DemoSummarizer
from backend.chat.failpoints import Failpoints
from backend.chat.memory_context import MemoryContext
from backend.chat.memory_health import MemoryHealth
from backend.chat.overflow import OverflowWorker
from backend.chat.overflow_policy import OverflowPolicy
from backend.chat.prompts import PromptRenderer, TemplateProblem
from backend.chat.request_builder import RequestBuilder, RequestSettings
from backend.chat.runtime import RuntimeRegistry, TenantRuntime
from backend.chat.service import ChatService
from backend.chat.services import Services
from backend.chat.summarizer import Summarizer, SummaryModel
from backend.chat.summary_resume import SummaryResumer
from backend.chat.tokens import TokenCounter
from backend.chat.turn import TurnRunner
from backend.chat.turn_lock import SessionLocks
from backend.chat.window import WindowPolicy
from backend.coordination.choice import open_coordinator
from backend.domain.clock import utc_now
from backend.errors import ConfigError
from backend.memory.base import MemoryStore
from backend.memory.database_store import DatabaseMemoryStore
from backend.memory.file_store import FileMemoryStore
from backend.model_choice import DEMO_MODEL, ModelChoice, choose_model, demo_settings
from backend.providers.base import ChatProvider
from backend.providers.demo import DemoProvider
from backend.providers.outcomes import ProviderOutcomes
from backend.providers.registry import build_chat_provider
from backend.settings import ModelSettings, Settings, layered_overrides, tenant_settings
from backend.settings_errors import describe_problems
from backend.storage.database import Database, open_database, pool_budget_problem
from backend.storage.messages import MessageRepository
from backend.storage.migrate import migrate
from backend.storage.overflow_jobs import OverflowJobRepository
from backend.storage.sessions import SessionRepository
from backend.storage.tenants import ApiKeyRepository, TenantNotFound, TenantRepository
from backend.storage.tool_conversations import ToolConversationRepository
from backend.storage.usage import UsageRepository
from backend.tenancy.keys import Authenticator
from backend.tenancy.quotas import RequestRateLimiter, TokenQuota
from backend.tools.base import Tool
from backend.tools.memory_tools import MemorySearchTool, MemoryWriteTool
from backend.tools.registry import ToolRegistry

log = logging.getLogger("tally")

ADMIN_KEY_ENV = "TALLY_ADMIN_KEY"


def build_memory_store(settings: Settings, database: Database) -> MemoryStore:
    if settings.memory.store == "database":
        return DatabaseMemoryStore(database)
    return FileMemoryStore(Path(settings.memory.path), Path(settings.data_dir))


def build_summarizer(
    settings: Settings,
    provider: ChatProvider,
    model: ModelSettings,
    prompts: PromptRenderer,
    outcomes: ProviderOutcomes | None = None,
) -> tuple[Summarizer, list[ChatProvider]]:
    """The summarizer's own model when configured, falling back to the chat model."""
    chat_model = SummaryModel(provider, model.name)
    budget = settings.memory.summarizer_input_tokens
    own = settings.summarizer
    if own.provider is None or own.name is None:
        return Summarizer([chat_model], prompts, input_budget_tokens=budget), []
    own_provider = build_chat_provider(
        settings.providers, ModelSettings(provider=own.provider, name=own.name), outcomes=outcomes
    )
    models = [SummaryModel(own_provider, own.name), chat_model]
    return Summarizer(models, prompts, input_budget_tokens=budget), [own_provider]


@asynccontextmanager
async def build_services(
    settings: Settings,
    *,
    extra_tools: Iterable[Tool] = (),
    provider: ChatProvider | None = None,
    summarizer_provider: ChatProvider | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> AsyncIterator[Services]:
    """Open the database (migrated), memory, the per-tenant runtimes and the turn runner, and
    resume unfinished summaries; close them all after. `provider` and `summarizer_provider`
    replace the configured models for every tenant (tests and embedding); `clock` is the time
    the prompt tells the model (tests and the bench move it)."""
    database = open_database(settings.database)
    outcomes = ProviderOutcomes()
    try:
        await migrate(database)
        factory = RuntimeFactory.for_database(
            settings,
            database,
            extra_tools=tuple(extra_tools),
            provider=provider,
            summarizer_provider=summarizer_provider,
            outcomes=outcomes,
            clock=clock,
        )
        tenants = TenantRepository(database)
        api_keys = ApiKeyRepository(database)
        usage = UsageRepository(database)
        runtimes = RuntimeRegistry(
            effective=lambda tenant_id, overrides: tenant_settings(
                settings, tenant_id, layered_overrides(settings, tenant_id, overrides)
            ),
            load_overrides=lambda tenant_id: _stored_overrides(tenants, tenant_id),
            build=factory.runtime,
        )
        tool_conversations = ToolConversationRepository(database)
        coordinator = open_coordinator(settings.coordination)
        turns = TurnRunner(
            messages=factory.messages,
            tool_conversations=tool_conversations,
            locks=SessionLocks(database),
            runtimes=runtimes,
            token_quota=TokenQuota(usage),
            coordinator=coordinator,
        )
        services = Services(
            settings=settings,
            database=database,
            sessions=factory.sessions,
            messages=factory.messages,
            tool_conversations=tool_conversations,
            memory=factory.store,
            overflow_jobs=factory.jobs,
            tenants=tenants,
            api_keys=api_keys,
            authenticator=Authenticator(api_keys, admin_key=os.environ.get(ADMIN_KEY_ENV)),
            usage=usage,
            coordinator=coordinator,
            runtimes=runtimes,
            memory_health=factory.memory_health,
            turns=turns,
            chat=ChatService(
                sessions=factory.sessions,
                messages=factory.messages,
                turns=turns,
                runtimes=runtimes,
                rate_limiter=RequestRateLimiter(coordinator.rate_storage),
                max_message_chars=settings.server.max_message_chars,
            ),
            provider_outcomes=outcomes,
        )
        for tenant_id in settings.tenants:  # a tenant's broken template stops start-up
            await runtimes.check(tenant_id, {})
            await tenants.ensure(tenant_id=tenant_id)
        if database.is_sqlite:  # one process per database: leases left are a crash's
            await factory.jobs.release_leases()
        resumer = SummaryResumer(factory.jobs, runtimes)
        await resumer.resume()
        await coordinator.open(turns.cancel_here)
        if not database.is_sqlite:  # one process on SQLite: its restart resumes everything
            resumer.sweep_every(settings.memory.lease_s)
        try:
            yield services
        finally:
            await resumer.aclose()
            await services.turns.aclose()
            await runtimes.aclose()
            await coordinator.aclose()
    finally:
        await database.dispose()


async def check_settings(settings: Settings) -> list[tuple[str, str, ChannelSettings]]:
    """Build (and close) every configured tenant's runtime as serving would, and check that
    the PostgreSQL pools fit the server, so `tally serve` refuses a config that cannot work
    before it listens and `tally doctor` reports it: ConfigError naming the file, the key path
    and the reason. The bots the file sets up: (tenant, name, settings)."""
    database = open_database(settings.database)
    factory = RuntimeFactory.for_database(settings, database)
    bots: list[tuple[str, str, ChannelSettings]] = []
    try:
        for tenant_id in (DEFAULT_TENANT, *settings.tenants):
            prefix = "" if tenant_id == DEFAULT_TENANT else f"tenants.{tenant_id}."
            overrides = settings.tenants.get(tenant_id, {})
            effective = tenant_settings(settings, tenant_id, overrides, is_from_file=True)
            bots += [(tenant_id, name, bot) for name, bot in effective.channels.items()]
            try:
                await factory.runtime(effective).aclose()
            except ConfigError as exc:
                problem = prefix + exc.message
                if isinstance(exc, TemplateProblem):
                    problem += f" ({exc.prompts_dir})"
                raise ConfigError(describe_problems(settings.source, [problem])) from exc
        problems = check_bots(bots)
        budget = await pool_budget_problem(database, settings.database)
        problems += [budget] if budget else []
        if problems:
            raise ConfigError(describe_problems(settings.source, problems))
    finally:
        await database.dispose()
    return bots


async def _stored_overrides(tenants: TenantRepository, tenant_id: str) -> dict[str, Any]:
    try:
        return (await tenants.get(tenant_id=tenant_id)).settings
    except TenantNotFound:
        return {}


@dataclass(frozen=True)
class RuntimeFactory:
    """What every tenant's runtime shares; `runtime` builds one from effective settings."""

    prompts: PromptRenderer
    store: MemoryStore
    sessions: SessionRepository
    messages: MessageRepository
    jobs: OverflowJobRepository
    extra_tools: tuple[Tool, ...]
    provider: ChatProvider | None
    summarizer_provider: ChatProvider | None
    outcomes: ProviderOutcomes | None = None
    memory_health: MemoryHealth = field(default_factory=MemoryHealth)  # one for all tenants
    clock: Callable[[], datetime] = utc_now

    @classmethod
    def for_database(
        cls,
        settings: Settings,
        database: Database,
        *,
        extra_tools: tuple[Tool, ...] = (),
        provider: ChatProvider | None = None,
        summarizer_provider: ChatProvider | None = None,
        outcomes: ProviderOutcomes | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> RuntimeFactory:
        return cls(
            prompts=PromptRenderer(settings.prompts_dir),
            store=build_memory_store(settings, database),
            sessions=SessionRepository(database),
            messages=MessageRepository(database),
            jobs=OverflowJobRepository(database),
            extra_tools=extra_tools,
            provider=provider,
            summarizer_provider=summarizer_provider,
            outcomes=outcomes,
            clock=clock,
        )

    def runtime(self, settings: Settings) -> TenantRuntime:
        """Build a tenant's runtime; ConfigError (before any client opens) if its settings
        cannot work, e.g. a system template that does not render."""
        if self.provider is not None:
            choice = ModelChoice(settings.model or DEMO_MODEL)
        else:
            choice = choose_model(settings)
        if choice.is_demo:
            settings = demo_settings(settings)
        model = choice.model
        counter = TokenCounter(model.name)
        budget = Budget(
            context_window=model.context_window,
            max_output_tokens=model.max_output_tokens,
            normal_ratio=settings.compaction.normal_ratio,
            emergency_ratio=settings.compaction.emergency_ratio,
        )
        tools = self._tools(settings)
        builder = self._builder(settings, model, tools, counter, budget)
        builder.check_template()
        provider, summarizer, owned = self._models(settings, choice)
        summarizer.check_template(settings.persona.language)
        return TenantRuntime(
            settings=settings,
            model=model,
            provider=provider,
            is_demo=choice.is_demo,
            demo_key_env=choice.missing_key_env,
            builder=builder,
            tools=tools,
            counter=counter,
            overflow=self._overflow_worker(settings, summarizer, budget),
            owned_providers=tuple(owned),
            memory_health=self.memory_health,
        )

    def _models(
        self, settings: Settings, choice: ModelChoice
    ) -> tuple[ChatProvider, Summarizer, list[ChatProvider]]:
        """The chat provider, the summarizer, and the providers the runtime must close."""
        provider: ChatProvider
        owned: list[ChatProvider]
        if self.provider is not None:
            provider, owned = self.provider, []
        elif choice.is_demo:
            provider = DemoProvider(key_env=choice.missing_key_env)
            owned = [provider]
        else:
            provider = build_chat_provider(settings.providers, choice.model, outcomes=self.outcomes)
            owned = [provider]
        if choice.is_demo and self.summarizer_provider is None:
            return provider, DemoSummarizer(provider, self.prompts), owned
        summarizer, own_providers = build_summarizer(
            settings,
            self.summarizer_provider or provider,
            choice.model,
            self.prompts,
            self.outcomes,
        )
        return provider, summarizer, owned + own_providers

    def _tools(self, settings: Settings) -> ToolRegistry:
        scope_by_user = settings.memory.scope == "user"
        return ToolRegistry.from_names(
            settings.tools.enabled,
            available=[
                MemorySearchTool(self.store, scope_by_user=scope_by_user),
                MemoryWriteTool(self.store, scope_by_user=scope_by_user),
                *self.extra_tools,
            ],
            timeout_s=settings.tools.timeout_s,
        )

    def _builder(
        self,
        settings: Settings,
        model: ModelSettings,
        tools: ToolRegistry,
        counter: TokenCounter,
        budget: Budget,
    ) -> RequestBuilder:
        memory = settings.memory
        return RequestBuilder(
            prompts=self.prompts,
            tools=tools,
            memory=MemoryContext(
                self.store,
                counter,
                budget_tokens=memory.prompt_budget_tokens,
                health=self.memory_health,
            ),
            counter=counter,
            settings=RequestSettings(
                persona=settings.persona,
                model=ModelLimits(
                    model.name,
                    model.max_output_tokens,
                    model.temperature,
                    model.supports_vision,
                    model.thinking_budget_tokens,
                ),
                budget=budget,
                scope_by_user=memory.scope == "user",
            ),
            clock=self.clock,
        )

    def _overflow_worker(
        self, settings: Settings, summarizer: Summarizer, budget: Budget
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
            lease_s=memory.lease_s,
            max_attempts=memory.max_summary_attempts,
        )
        return OverflowWorker(
            jobs=self.jobs,
            messages=self.messages,
            memory=self.store,
            summarizer=summarizer,
            policy=policy,
            failpoints=Failpoints.from_environment(),
            health=self.memory_health,
        )
