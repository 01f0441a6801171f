"""Composition: builds every service from settings (each tenant's runtime comes from
`composition/runtimes.py`)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from backend.chat.linking import Linking
from backend.chat.prompts import TemplateProblem
from backend.chat.quiet_sessions import QuietSessions
from backend.chat.runtime import RuntimeRegistry
from backend.chat.service import ChatService
from backend.chat.summary_resume import SummaryResumer
from backend.chat.turn import TurnRunner
from backend.chat.turn_lock import SessionLocks
from backend.composition.runtimes import RuntimeFactory
from backend.composition.services import Services
from backend.coordination.choice import open_coordinator
from backend.domain.clock import utc_now
from backend.domain.tenants import DEFAULT_TENANT
from backend.errors import ConfigError
from backend.memory.base import MemoryWriteFailed
from backend.memory.file_store import FileMemoryStore
from backend.providers.base import ChatProvider
from backend.providers.outcomes import ProviderOutcomes
from backend.settings import Settings, layered_overrides, tenant_settings
from backend.settings.channels import ChannelSettings, check_bots
from backend.settings.problems import describe_problems
from backend.storage.admin_operations import AdminOperationRepository
from backend.storage.audit import AuditLog
from backend.storage.database import open_database, pool_budget_problem
from backend.storage.migrate import migrate
from backend.storage.tenants import ApiKeyRepository, TenantNotFound, TenantRepository
from backend.storage.tool_conversations import ToolConversationRepository
from backend.storage.usage import UsageRepository
from backend.tenancy.keys import Authenticator
from backend.tenancy.quotas import RequestRateLimiter, TokenQuota
from backend.tools.base import Tool

log = logging.getLogger("tally")

ADMIN_KEY_ENV = "TALLY_ADMIN_KEY"
QUIET_SWEEP_S = 60.0  # how often quiet sessions are looked for (memory.distill_quiet_after_s)
Bots = list[tuple[str, str, ChannelSettings]]  # (tenant, bot name, its settings)


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
        await _create_memory_file(settings)
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
            linking=Linking(
                factory.store, runtimes, attempts=coordinator.rate_storage, clock=clock
            ),
            proposals=factory.proposals,
            audit=AuditLog(database),
            operations=AdminOperationRepository(database),
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
            mcp=factory.mcp,
            embedders=factory.embedders,
            quiet_sessions=QuietSessions(factory.sessions, runtimes, clock=clock),
        )
        with_servers = [DEFAULT_TENANT] if settings.tools.mcp_servers else []
        for tenant_id in settings.tenants:  # a tenant's broken template stops start-up
            effective = await runtimes.check(tenant_id, {})
            await tenants.ensure(tenant_id=tenant_id)
            with_servers += [tenant_id] if effective.tools.mcp_servers else []
        await runtimes.connect_tools(with_servers)  # their tools known before the first turn
        if database.is_sqlite:  # one process per database: leases left are a crash's
            await factory.jobs.release_leases()
        if moved := await services.linking.finish_moves():
            log.info("start-up: moved the memory of %d links a crash or a fault left", moved)
        if written := await factory.proposals.finish_approved():
            log.info("start-up: wrote %d approved memory lines a crash left unwritten", written)
        resumer = SummaryResumer(factory.jobs, runtimes)
        await resumer.resume()
        services.quiet_sessions.sweep_every(QUIET_SWEEP_S)
        await coordinator.open(turns.running.cancel, turns.running.decide)
        if not database.is_sqlite:  # one process on SQLite: its restart resumes everything
            resumer.sweep_every(settings.memory.lease_s)
        try:
            yield services
        finally:
            await resumer.aclose()
            await services.quiet_sessions.aclose()
            await services.turns.aclose()
            await runtimes.aclose()
            await factory.mcp.aclose()
            await factory.aclose()
            await coordinator.aclose()
    finally:
        await database.dispose()


async def check_settings(settings: Settings, *, earlier: Sequence[str] = ()) -> Bots:
    """Build (and close) every configured tenant's runtime as serving would, and check that
    the PostgreSQL pools fit the server, so `tally serve` refuses a config that cannot work
    before it listens and `tally doctor` reports it: ConfigError naming the file, then every
    problem (`earlier` ones, the file's own, first) as `key.path: reason`. The bots the file
    sets up: (tenant, name, settings)."""
    problems, bots = await _settings_problems(settings)
    problems = list(dict.fromkeys([*earlier, *problems]))  # a problem found twice, said once
    if problems:
        raise ConfigError(describe_problems(settings.source, problems), problems=problems)
    return bots


async def complete_config_error(error: ConfigError) -> ConfigError:
    """`error` (the file's own problems) with every problem building its runtimes finds too,
    so one run reports them all."""
    if not isinstance(error.partial, Settings):
        return error
    try:
        await check_settings(error.partial, earlier=error.problems)
    except ConfigError as complete:
        return complete
    return error


async def _settings_problems(settings: Settings) -> tuple[list[str], Bots]:
    database = open_database(settings.database)
    factory = RuntimeFactory.for_database(settings, database)
    problems: list[str] = []
    bots: Bots = []
    defaults: list[str] = []  # the default tenant's: a tenant inheriting one is not named again
    try:
        for tenant_id in (DEFAULT_TENANT, *settings.tenants):
            prefix = "" if tenant_id == DEFAULT_TENANT else f"tenants.{tenant_id}."
            found, effective = await _tenant_problems(factory, settings, tenant_id)
            if effective is not None:
                bots += [(tenant_id, name, bot) for name, bot in effective.channels.items()]
            if not prefix:
                defaults = [p.removeprefix(prefix) for p in found]
            problems += [p for p in found if not (prefix and p.removeprefix(prefix) in defaults)]
        problems += check_bots(bots)
        budget = await pool_budget_problem(database, settings.database)
        problems += [budget] if budget else []
    finally:
        await factory.aclose()
        await database.dispose()
    return problems, bots


async def _tenant_problems(
    factory: RuntimeFactory, settings: Settings, tenant_id: str
) -> tuple[list[str], Settings | None]:
    """A tenant's problems, each named by its key path in the file, and its settings (None
    when they are invalid)."""
    prefix = "" if tenant_id == DEFAULT_TENANT else f"tenants.{tenant_id}."
    overrides = settings.tenants.get(tenant_id, {})
    try:
        effective = tenant_settings(settings, tenant_id, overrides, is_from_file=True)
    except ConfigError as exc:
        return exc.problems or [exc.message], None
    found = await factory.problems(tenant_id, effective)
    return [prefix + _with_folder(problem) for problem in found], effective


def _with_folder(problem: ConfigError) -> str:
    """The problem; a template's names the prompts folder, for the operator."""
    if isinstance(problem, TemplateProblem):
        return f"{problem.message} ({problem.prompts_dir})"
    return problem.message


async def _create_memory_file(settings: Settings) -> None:
    """Makes the default tenant's MEMORY.md at the first start; one that cannot be written yet
    is no reason to refuse serving (memory reports itself degraded until it can be)."""
    if settings.memory.store != "file":
        return
    store = FileMemoryStore(Path(settings.memory.path), Path(settings.data_dir))
    try:
        if await store.create_default_file():
            log.info("created %s, the default tenant's memory", settings.memory.path)
    except MemoryWriteFailed as exc:
        log.warning("cannot create %s yet: %s", settings.memory.path, exc.message)


async def _stored_overrides(tenants: TenantRepository, tenant_id: str) -> dict[str, Any]:
    try:
        return (await tenants.get(tenant_id=tenant_id)).settings
    except TenantNotFound:
        return {}
