"""`tally serve --workers N`: several processes on one PostgreSQL database behind one port. Each
worker answers; `/metrics` adds up every worker's figures, whichever answers the scrape. On
SQLite, the command refuses before anything listens."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from backend.cli.main import main
from tests.crash import (
    START_TIMEOUT_S,
    ServerFiles,
    TallyProcess,
    create_session,
    send_turn,
    write_config,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.waiting import until_blocking


def on_postgres(files: ServerFiles, url: str, redis_url: str, prefix: str) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["database"] = {"url": url}
    config["coordination"] = {"redis_url": redis_url, "key_prefix": prefix}
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


def turns_counted(metrics: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("tally_turns_total{")
    )


def workers_with_counters(files: ServerFiles) -> int:
    """How many worker processes have recorded a counter (one file per process)."""
    return len(list((files.data_dir / "metrics").glob("counter_*.db")))


@pytest.mark.process
def test_two_workers_answer_on_one_port_and_metrics_add_up(
    upstream: FakeOpenAIServer, postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, upstream_url=upstream.base_url)
    files = on_postgres(config, postgres, redis_url, redis_prefix)
    sent = 0
    with TallyProcess(files, serve_args=("--workers", "2")) as server:
        # Each turn on a connection of its own: the kernel hands them to either worker.
        while workers_with_counters(files) < 2 and sent < 200:
            with server.client() as client:
                send_turn(client, create_session(client), f"hello {sent}")
            sent += 1
        with server.client() as client:
            scrapes = [turns_counted(client.get("/metrics").text) for _ in range(4)]
    assert workers_with_counters(files) == 2, f"one worker answered all {sent} turns"
    assert scrapes == [sent] * 4


def test_workers_are_refused_on_sqlite_and_without_redis(
    upstream: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_config(tmp_path, upstream_url=upstream.base_url)
    on_sqlite = main(["--config", str(files.config), "serve", "--workers", "2"])
    said_on_sqlite = capsys.readouterr().err
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["database"] = {"url": "postgresql+asyncpg://postgres@127.0.0.1:5432/test"}
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    no_redis = main(["--config", str(files.config), "serve", "--workers", "3"])
    assert (on_sqlite, no_redis) == (2, 2)  # refused before anything listens
    assert "--workers 2 needs PostgreSQL" in said_on_sqlite
    assert "--workers 3 needs coordination.redis_url" in capsys.readouterr().err


# Loaded by every Python process started with it on PYTHONPATH; only uvicorn's spawned workers
# (`--multiprocessing-fork`) wait: a worker whose start is slow, as on a busy machine.
SLOW_WORKER_START = """
import sys, time
if "--multiprocessing-fork" in sys.argv:
    time.sleep({seconds})
"""
UVICORN_DEFAULT_HEALTHCHECK_S = 5
TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) \S+: ")


def log_saying(files: ServerFiles, text: str) -> str:
    """The server's log once it contains `text`, else ''."""
    log = files.log.read_text(encoding="utf-8")
    return log if text in log else ""


@pytest.mark.process
def test_a_worker_slow_to_start_is_waited_for_and_workers_log_as_one_process(
    upstream: FakeOpenAIServer,
    postgres: str,
    redis_url: str,
    redis_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow = tmp_path / "slow_start"
    slow.mkdir()
    seconds = UVICORN_DEFAULT_HEALTHCHECK_S + 3
    (slow / "sitecustomize.py").write_text(SLOW_WORKER_START.format(seconds=seconds))
    monkeypatch.setenv("PYTHONPATH", str(slow))
    files = on_postgres(
        write_config(tmp_path, upstream_url=upstream.base_url), postgres, redis_url, redis_prefix
    )
    with TallyProcess(files, serve_args=("--workers", "2")) as server, server.client() as client:
        send_turn(client, create_session(client), "hello")
        # Said once both workers started (health answers once the first one has).
        log = until_blocking(
            lambda: log_saying(files, "serving on"),
            lambda: f"'serving on' logged:\n{files.log.read_text(encoding='utf-8')}",
            timeout_s=START_TIMEOUT_S,
            poll_s=0.05,
        )
    lines = [line for line in log.splitlines() if line and not line.startswith("====")]
    assert "died" not in log and "Traceback" not in log
    assert all(TEXT_LINE.match(line) for line in lines), log  # timestamps and levels
    assert sum("Application startup complete" in line for line in lines) == 2
    assert re.search(r"INFO tally: serving on http://127\.0\.0\.1:\d+ with 2 workers", log)
    assert any("turn completed" in line and "outcome=completed" in line for line in lines)
