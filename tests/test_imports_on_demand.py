"""A process imports what its deployment uses: the SDK of a platform, of MCP, of Anthropic or
Redis costs every worker its memory (tens of MB each) whether or not a bot, a server or a vendor
of that kind is configured. Each case serves the app in a process of its own and asks it which
of these it loaded."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.process

# The top-level modules of the SDKs a deployment may do without.
OPTIONAL_SDKS = {
    "mcp",
    "redis",
    "anthropic",
    "telegram",
    "dingtalk_stream",
    "lark_oapi",
    "aibot",
    "slack_sdk",
    "slack_bolt",
    "discord",
    "botpy",
}

# Serves the app on 127.0.0.1 with the test settings plus the sections given, answers
# /api/health once, then prints the optional SDKs this process imported.
PROBE = """
import asyncio, json, sys
from pathlib import Path
from backend.app import create_app
from tests.conftest import make_settings, serve

async def main():
    tmp = Path(sys.argv[1])
    settings = make_settings(f"sqlite+aiosqlite:///{tmp}/tally.db", tmp, **json.loads(sys.argv[2]))
    async with serve(create_app(settings)) as client:
        assert (await client.get("/api/health")).status_code == 200
    loaded = {name.split(".")[0] for name in sys.modules}
    print(json.dumps(sorted(loaded & set(json.loads(sys.argv[3])))))

asyncio.run(main())
"""


def loaded_sdks(tmp_path: Path, *, asked: set[str] = OPTIONAL_SDKS, **sections: Any) -> set[str]:
    """Which of the `asked` top-level modules a process serving the app loaded."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(tmp_path),
            json.dumps(sections),
            json.dumps([*asked]),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_bare_deployment_loads_no_optional_sdk(tmp_path: Path) -> None:
    assert loaded_sdks(tmp_path) == set()


def test_no_start_loads_alembic_unless_the_database_is_behind(tmp_path: Path) -> None:
    first = loaded_sdks(tmp_path, asked={"alembic"})  # an empty database: created directly
    again = loaded_sdks(tmp_path, asked={"alembic"})  # at the newest revision
    database = sqlite3.connect(tmp_path / "tally.db")
    with database:  # one revision behind, as after an upgrade of Tally
        database.execute("DROP TABLE memory_vectors")
        database.execute("UPDATE alembic_version SET version_num = '0010'")
    database.close()
    behind = loaded_sdks(tmp_path, asked={"alembic"})

    assert (first, again, behind) == (set(), set(), {"alembic"})


def test_a_configured_mcp_server_loads_its_sdk(tmp_path: Path, refused_port: int) -> None:
    loaded = loaded_sdks(
        tmp_path,
        tools={"mcp_servers": {"web": {"url": f"http://127.0.0.1:{refused_port}/mcp"}}},
    )
    assert "mcp" in loaded
