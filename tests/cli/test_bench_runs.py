"""Each `tally bench` run starts from nothing another run stored: Tally keeps its memory in
files beside the database, and when the runs shared them every run retrieved over what all the
runs before it had remembered, the later the slower (64 sessions: 10.3–10.9 ms a turn in a
full run against 8.0–8.9 alone)."""

from __future__ import annotations

import shutil
from pathlib import Path

from backend.bench.benchmark import DATA_SUFFIX, Processes
from backend.bench.run_config import tally_config
from backend.settings import Settings


def test_a_run_starts_with_nothing_an_earlier_run_stored() -> None:
    procs = Processes(pin=False, settings=Settings())
    try:
        memory = procs.tmp / f"01-tally-a{DATA_SUFFIX}" / "MEMORY.md"
        memory.parent.mkdir(parents=True)
        memory.write_text("- 2026-12-05|auto-overflow/web|a fact of run 1\n", encoding="utf-8")
        (procs.tmp / "01-tally-a.db").write_bytes(b"")
        (procs.tmp / "01-tally-a.log").write_bytes(b"kept: the report quotes logs")

        procs._settle()
        data = procs.tmp / f"02-tally-b{DATA_SUFFIX}"
        config = tally_config(f"sqlite+aiosqlite:///{procs.tmp}/02-tally-b.db", "http://up", data)

        assert sorted(path.name for path in procs.tmp.iterdir()) == ["01-tally-a.log"]
        assert Path(config["data_dir"]) == data
        assert Path(config["memory"]["path"]).parent == data
    finally:
        shutil.rmtree(procs.tmp)
