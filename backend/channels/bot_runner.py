"""Every tenant's bots, run for the life of the server (`run_bots`): started from each tenant's
effective settings, restarted when they change, stopped at shutdown, found by the webhook
route."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from backend.channels.base import Channel, ChannelStatus
from backend.channels.context import ChannelServices
from backend.channels.registry import build_channel
from backend.chat.failpoints import Failpoints
from backend.composition.services import Services
from backend.domain.tenants import DEFAULT_TENANT
from backend.errors import ConfigError, NotFound
from backend.settings.channels import ChannelSettings, check_bots
from backend.storage.channel_updates import ChannelUpdateRepository

log = logging.getLogger(__name__)

TenantBots = dict[str, ChannelSettings]


class BotNotFound(NotFound):
    pass


class BotRunner:
    def __init__(self, services: ChannelServices) -> None:
        self._services = services
        self._running: dict[tuple[str, str], tuple[ChannelSettings, Channel]] = {}

    def get(self, tenant_id: str, name: str) -> Channel | None:
        running = self._running.get((tenant_id, name))
        return None if running is None else running[1]

    def statuses(self) -> list[ChannelStatus]:
        return [channel.status for _, channel in self._running.values()]

    def check(self, tenant_id: str, bots: TenantBots) -> None:
        """ConfigError when `bots` could not run as `tenant_id`'s next to the other tenants'
        (a token not set, or one another bot uses already)."""
        others = [
            (tenant, name, settings)
            for (tenant, name), (settings, _) in self._running.items()
            if tenant != tenant_id
        ]
        problems = check_bots([*others, *((tenant_id, n, s) for n, s in bots.items())])
        if problems:
            raise ConfigError("; ".join(problems))

    async def apply(self, tenant_id: str, bots: TenantBots) -> None:
        """Run exactly `bots` for `tenant_id`: start new ones, restart changed ones, stop
        removed ones. ConfigError (nothing changed) when they cannot run."""
        self.check(tenant_id, bots)
        for (tenant, name), (settings, _) in list(self._running.items()):
            if tenant == tenant_id and bots.get(name) != settings:
                await self._stop(tenant, name)
        for name, settings in bots.items():
            if (tenant_id, name) not in self._running:
                await self._start(tenant_id, name, settings)

    async def restart(self, tenant_id: str, name: str) -> ChannelStatus:
        """Stop one bot and start it again with the same settings (a connection stuck, a
        token renewed at the platform); BotNotFound when this process does not run it."""
        running = self._running.get((tenant_id, name))
        if running is None:
            raise BotNotFound(f"tenant {tenant_id!r} has no bot {name!r}")
        await self._stop(tenant_id, name)
        await self._start(tenant_id, name, running[0])
        return self._running[(tenant_id, name)][1].status

    async def aclose(self) -> None:
        """Stop every bot at once: each gives its replies in hand the same few seconds."""
        await asyncio.gather(*(self._stop(tenant, name) for tenant, name in list(self._running)))

    async def _start(self, tenant_id: str, name: str, settings: ChannelSettings) -> None:
        channel = build_channel(tenant_id, name, settings, self._services)
        await channel.start()
        self._running[(tenant_id, name)] = (settings, channel)
        log.info(
            "bot %s (%s, %s) started",
            name,
            settings.kind,
            settings.mode,
            extra={"tenant": tenant_id},
        )

    async def _stop(self, tenant_id: str, name: str) -> None:
        _, channel = self._running.pop((tenant_id, name))
        await channel.stop()


@asynccontextmanager
async def run_bots(services: Services) -> AsyncIterator[BotRunner]:
    """Start every tenant's bots (from config.yaml and from settings set through the admin
    API); stop them all after."""
    updates = ChannelUpdateRepository(services.database)
    if services.database.is_sqlite:  # one process per database: leases left are a crash's
        await updates.release_leases()
    bots = BotRunner(
        ChannelServices(
            chat=services.chat,
            sessions=services.sessions,
            memory=services.memory,
            runtimes=services.runtimes,
            updates=updates,
            linking=services.linking,
            proposals=services.proposals,
            failpoints=Failpoints.from_environment(),
            database=services.database,
            update_lease_s=services.settings.coordination.lease_s,
        )
    )
    try:
        stored = [t.id for t in await services.tenants.list_all() if not t.is_disabled]
        for tenant_id in dict.fromkeys([DEFAULT_TENANT, *services.settings.tenants, *stored]):
            runtime = await services.runtimes.get(tenant_id)
            await bots.apply(tenant_id, runtime.settings.channels)
        yield bots
    finally:
        await bots.aclose()
