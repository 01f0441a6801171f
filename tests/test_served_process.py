"""A served process (`tally serve`, each of its workers) lets the garbage collector skip what
starting built: it lives as long as the process, and full collections walked it every time."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from backend.app import create_app
from backend.settings import Settings
from tests.conftest import serve


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process collects everything again


async def test_a_served_app_freezes_what_starting_built(settings: Settings, unfrozen: None) -> None:
    async with serve(create_app(settings, is_served=True)) as client:
        frozen = gc.get_freeze_count()
        health = await client.get("/api/health")

    assert health.status_code == 200
    assert frozen > 10_000  # the modules, the app and its services


async def test_an_app_built_for_tests_or_tools_freezes_nothing(
    settings: Settings, unfrozen: None
) -> None:
    async with serve(create_app(settings)) as client:
        frozen = gc.get_freeze_count()
        await client.get("/api/health")

    assert frozen == 0
