"""What one run of `tally bench` serves: the command that starts Tally, its config around the
fake upstream (on a scratch PostgreSQL database with `--workers`), and a free loopback port."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

from backend.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
HOST = "127.0.0.1"  # loopback only: every URL is built from this
WINDOW = 50  # persona.max_history_messages of the bench's config


def tally_command() -> list[str]:
    script = Path(sys.executable).with_name("tally")
    return [str(script)] if script.exists() else [sys.executable, "-m", "backend"]


def tally_config(database_url: str, up_url: str, data_dir: Path) -> dict[str, Any]:
    """A run's config: its own database and its own data folder, the default tenant's
    MEMORY.md in it (by default it lies beside the config, which every run shares), so that no
    run starts with what another remembered."""
    return {
        "server": {"host": HOST},
        "data_dir": str(data_dir),
        "database": {"url": database_url},
        "providers": {
            "fake": {"kind": "openai_compatible", "base_url": f"{up_url}/v1", "max_retries": 0}
        },
        "model": {"provider": "fake", "name": "fake-model"},
        "persona": {"max_history_messages": WINDOW},
        "memory": {"path": str(data_dir / "MEMORY.md")},
        "tools": {"enabled": ["now"]},
        "prompts_dir": str(ROOT / "prompts"),
    }


def workers_config(
    url: str, up_url: str, settings: Settings, run: str, data_dir: Path
) -> dict[str, Any]:
    """The bench's config on a scratch PostgreSQL database with the configured pool sizes (so
    that W workers fit the server's connections as the operator sized them) and the configured
    Redis, under a key prefix of the run's own."""
    coordination = settings.coordination.model_dump(exclude_none=True)
    config = tally_config(url, up_url, data_dir)
    config["database"] = {**settings.database.model_dump(exclude={"processes"}), "url": url}
    config["coordination"] = {**coordination, "key_prefix": f"tally-bench-{run}"}
    return config


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port
