"""`tally bench --quick` through the scale scenarios, end to end: d (many sessions at once),
e (a long archived history) and f (many SSE streams against a slow model), beside a."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.bench.run_config import workers_config
from backend.settings import load_settings
from tests.cli.runner import config
from tests.conftest import ROOT

pytestmark = pytest.mark.process


def test_quick_bench_completes_every_turn_of_the_scale_scenarios(tmp_path: Path) -> None:
    out = tmp_path / "latest.json"
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    environment.pop("TALLY_BENCH_FLOOR", None)
    environment.pop("TALLY_BENCH_REPEATS", None)
    result = subprocess.run(
        [sys.executable, "-m", "backend", "--config", str(config(tmp_path)), "bench", "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**environment, "TALLY_BENCH_ONLY": "a,d,e,f", "TALLY_BENCH_OUT": str(out)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    results = {r["scenario"]: r for r in report["results"] if r["target"] == "tally"}
    assert set(results) == {"a", "a-sse", "d", "e", "f"}
    for key, requested in (("d", 8 * 3), ("e", 3), ("f", 20)):
        assert results[key]["turns"] == requested
        assert results[key]["ok"] == requested and results[key]["failed"] == 0, results[key]
    # e's history was archived as evictions leave it: its first turn had no backlog to
    # summarize: the chat call and the memory write of its window.
    assert results["e"]["first_turn_llm_calls"] <= 4  # unarchived, 10,000 took dozens
    assert results["f"]["peak_rss_mb"] > 0 and results["f"]["wall_s"] >= 1.0
    checks = {(c["scenario"], c["figure"]): c for c in report["scale"]}
    assert checks[("d", "completed turns")]["is_met"] is True
    assert checks[("e", "completed turns")]["is_met"] is True
    assert checks[("f", "completed streams")]["is_met"] is True
    assert checks[("e", "CPU ms/turn ÷ a (fresh session)")]["value"].endswith("×")
    assert checks[("f", "peak RSS MB")]["is_met"] is not None
    assert "Scale targets:" in result.stdout and "f: 20 SSE streams at once" in result.stdout


def test_workers_runs_use_the_configured_pools_on_their_scratch_database(tmp_path: Path) -> None:
    """Three workers at the default pools need 135 connections, more than a default PostgreSQL
    takes: the operator sizes the pools in the config given to `tally bench --workers`."""
    path = tmp_path / "deploy.yaml"
    path.write_text(
        "database:\n"
        "  url: postgresql+asyncpg://bench@db.example/tally\n"
        "  pool_size: 4\n  max_overflow: 2\n  lock_pool_size: 16\n  lock_max_overflow: 0\n"
        "  processes: 3\n"
        "coordination: {redis_url: 'redis://127.0.0.1:6379/0'}\n"
    )
    settings = load_settings(path)

    run = workers_config(
        "postgresql+asyncpg://bench@db.example/scratch_7",
        "http://up",
        settings,
        "07",
        tmp_path / "07-data",
    )

    assert run["database"]["url"] == "postgresql+asyncpg://bench@db.example/scratch_7"
    pools = {key: run["database"][key] for key in ("pool_size", "max_overflow", "lock_pool_size")}
    assert pools == {"pool_size": 4, "max_overflow": 2, "lock_pool_size": 16}
    assert "processes" not in run["database"]  # tally serve --workers counts its own
    assert run["coordination"]["key_prefix"] == "tally-bench-07"
