"""What every tenant's runtime is built from: the memory store, the summarizer, the tools and
the providers its effective settings name."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from backend.chat.budget import Budget
from backend.chat.compiler import ModelLimits
from backend.chat.demo_summarizer import DemoSummarizer
from backend.chat.failpoints import Failpoints
from backend.chat.memory_context import MemoryContext, Retrieval
from backend.chat.memory_health import MemoryHealth
from backend.chat.overflow import OverflowWorker
from backend.chat.overflow_policy import CALLS_PER_JOB, OverflowPolicy
from backend.chat.prompts import PromptRenderer
from backend.chat.request_builder import RequestBuilder, RequestSettings
from backend.chat.runtime import TenantRuntime
from backend.chat.summarizer import Summarizer, SummaryModel
from backend.chat.tokens import TokenCounter
from backend.chat.window import JobBound, WindowPolicy
from backend.composition.model_choice import DEMO_MODEL, ModelChoice, choose_model, demo_settings
from backend.domain.clock import utc_now
from backend.errors import ConfigError
from backend.memory.base import MemoryStore
from backend.memory.database_store import DatabaseMemoryStore
from backend.memory.file_store import FileMemoryStore
from backend.memory.linked_scopes import PersonalMemory
from backend.memory.proposals import Confirmation, MemoryProposals
from backend.providers.base import ChatProvider
from backend.providers.demo import DemoProvider
from backend.providers.outcomes import ProviderOutcomes
from backend.providers.registry import build_chat_provider
from backend.retrieval.embedders import EmbedderPool
from backend.retrieval.recall import Recall
from backend.settings import ModelSettings, Settings
from backend.settings.pricing import charge
from backend.storage.archive import ArchiveReader
from backend.storage.database import Database
from backend.storage.identities import IdentityRepository
from backend.storage.memory_vectors import VectorRepository
from backend.storage.messages import MessageRepository
from backend.storage.overflow_jobs import OverflowJobRepository
from backend.storage.pending_memory import PendingMemoryRepository
from backend.storage.sessions import SessionRepository
from backend.tools.base import Tool
from backend.tools.mcp_tools import McpServers
from backend.tools.registry import ToolRegistry
from backend.tools.toolbox import tool_registry

T = TypeVar("T")


def build_memory_store(settings: Settings, database: Database) -> PersonalMemory:
    """The configured store, keyed by the person an end user's identities are linked to."""
    store: MemoryStore
    if settings.memory.store == "database":
        store = DatabaseMemoryStore(database)
    else:
        store = FileMemoryStore(Path(settings.memory.path), Path(settings.data_dir))
    return PersonalMemory(store, IdentityRepository(database))


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


@dataclass(frozen=True)
class RuntimeFactory:
    """What every tenant's runtime shares; `runtime` builds one from effective settings."""

    prompts: PromptRenderer
    store: PersonalMemory
    sessions: SessionRepository
    messages: MessageRepository
    jobs: OverflowJobRepository
    proposals: MemoryProposals  # confirm before remember
    recall: Recall  # every tenant's memory indexes, in this process
    extra_tools: tuple[Tool, ...]
    provider: ChatProvider | None
    summarizer_provider: ChatProvider | None
    summarizer_slots: asyncio.Semaphore  # memory.summarizer_jobs, for every tenant's jobs
    outcomes: ProviderOutcomes | None = None
    memory_health: MemoryHealth = field(default_factory=MemoryHealth)  # one for all tenants
    clock: Callable[[], datetime] = utc_now
    mcp: McpServers = field(default_factory=McpServers)  # every tenant's MCP connections
    embedders: EmbedderPool = field(default_factory=EmbedderPool)  # those tenants' settings name

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
        store = build_memory_store(settings, database)
        return cls(
            prompts=PromptRenderer(settings.prompts_dir),
            store=store,
            sessions=SessionRepository(database),
            messages=MessageRepository(database, clock=clock),
            jobs=OverflowJobRepository(database),
            proposals=MemoryProposals(PendingMemoryRepository(database), store, clock=clock),
            recall=_recall(database),
            extra_tools=extra_tools,
            provider=provider,
            summarizer_provider=summarizer_provider,
            outcomes=outcomes,
            clock=clock,
            summarizer_slots=asyncio.Semaphore(settings.memory.summarizer_jobs),
        )

    def runtime(self, tenant_id: str, settings: Settings) -> TenantRuntime:
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
        budget = _budget(settings, model)
        tools = self._tools(tenant_id, settings)
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
            demo_hint=choice.hint,
            builder=builder,
            tools=tools,
            counter=counter,
            overflow=self._overflow_worker(
                settings, summarizer, budget, settings.summarizer.name or model.name
            ),
            owned_providers=tuple(owned),
            memory_health=self.memory_health,
        )

    async def problems(self, tenant_id: str, settings: Settings) -> list[ConfigError]:
        """Every reason the tenant's runtime cannot be built, as `runtime` builds it; each step
        is tried even when one before failed (with a stand-in for what it would have made), so
        one check names an unknown tool and a broken template together."""
        found: list[ConfigError] = []

        def attempt(step: Callable[[], T]) -> T | None:
            try:
                return step()
            except ConfigError as exc:
                found.append(exc)
                return None

        choice = attempt(lambda: choose_model(settings)) or ModelChoice(DEMO_MODEL, is_demo=True)
        if choice.is_demo:
            settings = demo_settings(settings)
        model = choice.model
        counter = TokenCounter(model.name)
        budget = _budget(settings, model)
        tools = attempt(lambda: self._tools(tenant_id, settings)) or ToolRegistry([])
        attempt(self._builder(settings, model, tools, counter, budget).check_template)
        models = attempt(lambda: self._models(settings, choice))
        if models is not None:
            _, summarizer, owned = models
            attempt(lambda: summarizer.check_template(settings.persona.language))
            for provider in owned:
                await provider.aclose()
        return found

    def _models(
        self, settings: Settings, choice: ModelChoice
    ) -> tuple[ChatProvider, Summarizer, list[ChatProvider]]:
        """The chat provider, the summarizer, and the providers the runtime must close."""
        provider: ChatProvider
        owned: list[ChatProvider]
        if self.provider is not None:
            provider, owned = self.provider, []
        elif choice.is_demo:
            provider = DemoProvider(hint=choice.hint or "")
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

    def _tools(self, tenant_id: str, settings: Settings) -> ToolRegistry:
        return tool_registry(
            settings,
            tenant_id=tenant_id,
            memory=self.store,
            mcp=self.mcp,
            confirmation=self._confirmation(settings),
            extra_tools=self.extra_tools,
        )

    def retrieval(self, settings: Settings) -> Retrieval:
        """How a tenant's memory is found, with the embedder its settings name."""
        memory = settings.memory
        return Retrieval(
            recall=self.recall,
            embedder=self.embedders.get(memory.embeddings, settings.providers),
            search_archive=memory.search_archive,
            standing_share=memory.standing_share,
            deletes_evicted=memory.delete_evicted,
        )

    async def aclose(self) -> None:
        """Close what every tenant's runtime shared: embedders and memory indexes."""
        await self.embedders.aclose()
        self.recall.close()

    def _confirmation(self, settings: Settings) -> Confirmation | None:
        """Where a tenant's lines about a person go first, when it confirms before remembering."""
        memory = settings.memory
        if not (memory.confirm_writes and memory.scope == "user"):
            return None
        return Confirmation(self.proposals, memory.confirm_expire_s)

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
                retrieval=self.retrieval(settings),
                scope_by_user=memory.scope == "user",
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
        self, settings: Settings, summarizer: Summarizer, budget: Budget, summary_model: str
    ) -> OverflowWorker:
        memory = settings.memory
        policy = OverflowPolicy(
            window=WindowPolicy(
                max_messages=settings.persona.max_history_messages,
                batch=memory.overflow_batch,
                normal_token_limit=budget.normal_limit,
                job=JobBound(memory.summarizer_input_tokens, CALLS_PER_JOB),
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
            confirmation=self._confirmation(settings),
            price=functools.partial(charge, settings.pricing, summary_model),
            embed_written=functools.partial(self._embed_written, self.retrieval(settings)),
            slots=self.summarizer_slots,
        )

    async def _embed_written(
        self, retrieval: Retrieval, tenant_id: str, scope_key: str, facts: Sequence[str]
    ) -> None:
        memory_key = await self.store.scope_of(tenant_id=tenant_id, scope_key=scope_key)
        await self.recall.remember(tenant_id, memory_key, facts, retrieval.embedder)


def _recall(database: Database) -> Recall:
    """Memory's search indexes, told of every deletion this process makes."""
    recall = Recall(archive=ArchiveReader(database), vectors=VectorRepository(database))
    database.notices.listen(recall)
    return recall


def _budget(settings: Settings, model: ModelSettings) -> Budget:
    return Budget(
        context_window=model.context_window,
        max_output_tokens=model.max_output_tokens,
        normal_ratio=settings.compaction.normal_ratio,
        emergency_ratio=settings.compaction.emergency_ratio,
    )
