"""A tenant's runtime is rebuilt only when its stored overrides change, and they are read at
most once per `ttl_s` however many turns ask at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from backend.chat.runtime import RuntimeRegistry, TenantRuntime
from backend.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


async def test_turns_arriving_together_after_the_ttl_read_the_overrides_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock.monotonic)  # the registry reads `time.monotonic`
    reads: list[str] = []
    built: list[str] = []

    async def load_overrides(tenant_id: str) -> dict[str, Any]:
        reads.append(tenant_id)
        await asyncio.sleep(0)  # a database read: the other turns queue meanwhile
        return {}

    def build(tenant_id: str, _settings: Settings) -> TenantRuntime:
        built.append(tenant_id)
        return cast(TenantRuntime, object())

    registry = RuntimeRegistry(
        effective=lambda _tenant, _overrides: cast(Settings, None),
        load_overrides=load_overrides,
        build=build,
        ttl_s=5.0,
    )
    first = await registry.get("acme")
    clock.now += 4.0
    assert await registry.get("acme") is first and reads == ["acme"]
    clock.now += 2.0  # past the ttl: 32 turns at once
    runtimes = await asyncio.gather(*(registry.get("acme") for _ in range(32)))
    assert all(runtime is first for runtime in runtimes)  # the same overrides: kept
    assert reads == ["acme", "acme"]
    assert built == ["acme"]
