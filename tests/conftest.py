"""Shared fixtures: a fresh database per test (SQLite file, and PostgreSQL when reachable),
settings pointing at it, and the real app served by uvicorn on 127.0.0.1 (port 0)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from backend.app import uvicorn_options
from backend.settings import Settings, parse_settings
from tests.waiting import until

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
VENDOR_ENV = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


# ---- test tiers (markers declared in pyproject.toml; `make check` runs the unmarked) --------
#
#   browser   tests/browser/: Chromium driven by Playwright. Marked here, by folder.
#   postgres  runs against PostgreSQL: marked here for a test asking for the `postgres` fixture,
#             and on the "postgresql" parameter of `database_url` (its "sqlite" one is fast);
#             tests/storage/test_storage_outage.py marks itself (a cluster of its own).
#   redis     runs against Redis: marked here for a test asking for the `redis_url` fixture.
#   process   starts a real OS process of its own (`tally` on the command line, the server to
#             kill -9, the bench, a Python script, git, make, pip, an MCP server over stdio or
#             HTTP): marked in its module, `pytestmark = pytest.mark.process` when every test
#             there does, else `@pytest.mark.process` on the test. The `mount` a disk-fault
#             fixture runs is set-up, not the test's subject, and is not marked.
#   slow      takes seconds by itself (an eval, a fuzz run, a long scenario; 3 s or more on a
#             loaded 2-core machine): `@pytest.mark.slow` on the test, by hand.
#
# A test can carry several marks; `make check` deselects any of them, `make test` runs all.

BROWSER_TESTS = ROOT / "tests" / "browser"
MARK_BY_FIXTURE = {"postgres": pytest.mark.postgres, "redis_url": pytest.mark.redis}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(BROWSER_TESTS):
            item.add_marker(pytest.mark.browser)
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in MARK_BY_FIXTURE:
                item.add_marker(MARK_BY_FIXTURE[fixture])


# `make check` runs the fast tier as two pytest processes side by side, one a core, each given
# every other test (`--shard 1/2`, `--shard 2/2`): pytest-xdist is not among our dependencies.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shard", metavar="K/N", help="run only the K-th of every N selected tests (1 <= K <= N)"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--shard"):
        config.pluginmanager.register(Shard(config.getoption("--shard")))


class Shard:
    """Keeps the K-th of every N tests, after `-m` and `-k` chose them (so the shares are even)."""

    def __init__(self, spec: str) -> None:
        k, n = (int(part) for part in spec.split("/"))
        if not 1 <= k <= n:
            raise pytest.UsageError(f"--shard {spec}: K/N with 1 <= K <= N")
        self.k, self.n = k, n

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        mine = [index % self.n == self.k - 1 for index in range(len(items))]
        config.hook.pytest_deselected(items=[i for i, m in zip(items, mine, strict=True) if not m])
        items[:] = [item for item, is_mine in zip(items, mine, strict=True) if is_mine]


@pytest.fixture(autouse=True)
def _no_vendor_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDKs read these; a developer's real keys must never reach a test."""
    for name in VENDOR_ENV:
        monkeypatch.delenv(name, raising=False)


def _postgres_url() -> str | None:
    url = os.environ.get("TALLY_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    parts = urlsplit(url.replace("+asyncpg", ""))
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), 0.3):
            return url
    except OSError:
        return None


POSTGRES_URL = _postgres_url()
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def _redis_url() -> str | None:
    url = os.environ.get("TALLY_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 0.3):
            return url
    except OSError:
        return None


REDIS_URL = _redis_url()


@pytest.fixture
def redis_url() -> str:
    """A reachable Redis (TALLY_TEST_REDIS_URL, else 127.0.0.1:6379), or the test is skipped."""
    if REDIS_URL is None:
        pytest.skip(
            "Redis runs skipped: no server on 127.0.0.1:6379 "
            "(set TALLY_TEST_REDIS_URL to point the suite at one)"
        )
    return REDIS_URL


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A local port that refuses connections for the whole test: bound, never listening, so
    no other process (another test run on this machine) can take it meanwhile. A port found
    free and closed again can be taken, and then something answers there after all."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


@pytest.fixture
def redis_prefix() -> str:
    """Keys of this test's own: concurrent runs and tests never share them."""
    return f"tally-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"


async def _create_database(url: str, name: str, *, drop: bool = False) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            if not drop:
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str | None]:
    """A database of this test run's own, so concurrent runs never share tables."""
    if POSTGRES_URL is None:
        yield None
        return
    name = f"tally_test_{os.getpid()}"
    asyncio.run(_create_database(POSTGRES_URL, name))
    yield POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
    asyncio.run(_create_database(POSTGRES_URL, name, drop=True))


@pytest.fixture
async def postgres(postgres_url: str | None) -> str:
    """An empty PostgreSQL database of this run's own, for tests that need PostgreSQL itself
    (several processes, its connection limits), or the test is skipped."""
    if postgres_url is None:
        pytest.skip("PostgreSQL runs skipped: no server on 127.0.0.1:5432")
    await _reset_postgres(postgres_url)
    return postgres_url


async def _reset_postgres(url: str) -> None:
    """An empty `public` schema: every PostgreSQL test starts from a fresh database."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
    finally:
        await engine.dispose()


# The PostgreSQL half carries the `postgres` mark; the SQLite half stays in the fast tier.
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str | None
) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'tally.db'}"
    if postgres_url is None:
        pytest.skip(
            "PostgreSQL runs skipped: no server on 127.0.0.1:5432 "
            "(set TALLY_TEST_POSTGRES_URL to point the suite at one)"
        )
    await _reset_postgres(postgres_url)
    return postgres_url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'tally.db'}"


class ManualClock:
    """The time the app reads (`create_app(clock=...)`), moved by the test: `clock.now += ...`."""

    def __init__(self, now: datetime = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def make_settings(database_url: str, tmp_path: Path, **overrides: Any) -> Settings:
    raw: dict[str, Any] = {
        "database": {"url": database_url},
        "prompts_dir": str(ROOT / "prompts"),
        "data_dir": str(tmp_path / "data"),
        "memory": {"path": str(tmp_path / "MEMORY.md")},
    }
    raw.update(overrides)
    return parse_settings(raw, source="test", base_dir=tmp_path)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return make_settings(database_url, tmp_path)


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Run `app` under uvicorn on 127.0.0.1 in this event loop; yield a client for it.

    A Tally app is served with the uvicorn options `tally serve` uses (its header bounds)."""
    settings: Settings | None = getattr(app.state, "settings", None)
    options = uvicorn_options(settings) if settings is not None else {}
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", **options
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())

    def started() -> bool:
        if task.done():
            task.result()  # start-up failed: raise its error
        return bool(server.started)

    await until(started, "uvicorn started", poll_s=0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def anyio_backend() -> Iterator[str]:
    yield "asyncio"


# ---- a disk that fills up (storage fault tests) ---------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"a full disk needs a tmpfs mount (root): {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Write until the disk has no byte left; the file to delete to free it."""
    filler = disk / "filler"
    # Unbuffered: a buffered file keeps what the full disk refused and fails again on close.
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass
    return filler
