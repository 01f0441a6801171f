"""Per-tenant runtimes: each tenant's effective settings (config defaults overlaid with its
overrides) built once into the pieces a turn needs, and rebuilt when the overrides change."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from backend.chat.memory_health import MemoryHealth
from backend.chat.overflow import OverflowWorker
from backend.chat.request_builder import RequestBuilder
from backend.chat.tokens import TokenCounter
from backend.providers.base import ChatProvider
from backend.settings import ModelSettings, Settings
from backend.tools.registry import ToolRegistry


@dataclass(frozen=True, slots=True)
class TenantRuntime:
    settings: Settings
    model: ModelSettings
    provider: ChatProvider
    is_demo: bool
    demo_key_env: str | None  # in demo mode: the unset variable that would name a real model
    demo_hint: str | None  # in demo mode: what makes a real model answer (model_choice)
    builder: RequestBuilder
    tools: ToolRegistry
    counter: TokenCounter
    overflow: OverflowWorker
    owned_providers: tuple[ChatProvider, ...]
    memory_health: MemoryHealth

    async def aclose(self) -> None:
        await self.overflow.aclose()
        for provider in self.owned_providers:
            await provider.aclose()


RuntimeBuilder = Callable[[str, Settings], TenantRuntime]  # (tenant id, its settings)
OverridesLoader = Callable[[str], Awaitable[dict[str, Any]]]


class RuntimeRegistry:
    """Hands out each tenant's runtime. Overrides are re-read at most every `ttl_s` seconds
    (and at once after `invalidate`), so a change made by another worker arrives soon."""

    def __init__(
        self,
        *,
        effective: Callable[[str, dict[str, Any]], Settings],
        load_overrides: OverridesLoader,
        build: RuntimeBuilder,
        ttl_s: float = 5.0,
    ) -> None:
        self._effective = effective
        self._load_overrides = load_overrides
        self._build = build
        self._ttl_s = ttl_s
        self._runtimes: dict[str, tuple[str, float, TenantRuntime]] = {}
        self._retired: list[TenantRuntime] = []
        self._lock = asyncio.Lock()

    async def get(self, tenant_id: str) -> TenantRuntime:
        fresh = self._fresh(tenant_id)
        if fresh is not None:
            return fresh
        async with self._lock:
            fresh = self._fresh(tenant_id)  # turns waiting here while one reloaded: one read
            if fresh is not None:
                return fresh
            overrides = await self._load_overrides(tenant_id)
            fingerprint = hashlib.sha256(
                json.dumps(overrides, sort_keys=True, default=str).encode()
            ).hexdigest()
            cached = self._runtimes.get(tenant_id)
            if cached is not None and cached[0] == fingerprint:
                self._runtimes[tenant_id] = (fingerprint, time.monotonic(), cached[2])
                return cached[2]
            runtime = self._build(tenant_id, self._effective(tenant_id, overrides))
            if cached is not None:  # turns in flight may still use its clients: those close
                self._retired.append(cached[2])  # at shutdown; its summaries move to the new one
                await cached[2].overflow.aclose(grace_s=0)
            self._runtimes[tenant_id] = (fingerprint, time.monotonic(), runtime)
            return runtime

    def _fresh(self, tenant_id: str) -> TenantRuntime | None:
        cached = self._runtimes.get(tenant_id)
        if cached is not None and time.monotonic() - cached[1] < self._ttl_s:
            return cached[2]
        return None

    async def check(self, tenant_id: str, overrides: dict[str, Any]) -> Settings:
        """The settings `overrides` would give, after building (and closing) their runtime:
        ConfigError if it cannot work, so a bad change is refused instead of breaking the
        tenant's next request."""
        effective = self._effective(tenant_id, overrides)
        await self._build(tenant_id, effective).aclose()
        return effective

    async def connect_tools(self, tenant_ids: list[str]) -> None:
        """Start connecting these tenants' MCP servers (at start-up: their tools known early)."""
        for tenant_id in tenant_ids:
            (await self.get(tenant_id)).tools.connect()

    def invalidate(self, tenant_id: str) -> None:
        cached = self._runtimes.get(tenant_id)
        if cached is not None:
            self._runtimes[tenant_id] = (cached[0], float("-inf"), cached[2])

    def active(self) -> list[TenantRuntime]:
        return [runtime for _, _, runtime in self._runtimes.values()]

    async def wait_idle(self) -> None:
        """Until no overflow job runs in any tenant (tests and shutdown)."""
        for runtime in [*self.active(), *self._retired]:
            await runtime.overflow.wait_idle()

    async def aclose(self) -> None:
        for runtime in [*self.active(), *self._retired]:
            await runtime.aclose()
        self._runtimes.clear()
        self._retired.clear()
