"""`tally bench`: what Tally costs per chat turn on top of its model call.

An instant fake upstream (`bench/upstream.py`) stands in for the model, so all that is measured
is server overhead. Every scenario gets a fresh `tally serve` with a fresh database; the load
driver (`bench/driver.py`, httpx2) warms it up, waits until it is idle, measures, and waits until
it is idle again (background work after the reply counts). Seeded sessions get one unmeasured
turn first, reported on a line of its own. The report goes to stdout and bench/out/latest.json.

Scale (backend/bench/scale.py has the targets): (d) 64 sessions × 20 turns at once; (e) a
session holding 100,000 messages, seeded straight into SQLite as Tally's evictions leave a long
session (all but the window archived, memory distilled, a summary), then 50 turns; (f) 1,000
SSE turns opened at once, each on a session of its own, while the fake model takes 30 s per
reply. The bench raises its open-file limit to the hard limit, for its servers to inherit.

`--workers N` measures several workers instead: `tally serve --workers W` for W = 1 … N on the
config's PostgreSQL server (a scratch database per run, dropped after) and its Redis, at 8 and
64 concurrent sessions.

Environment:
  TALLY_BENCH_FLOOR=DIR   also run the floor app (`DIR/floor_app.py`: the smallest honest chat
                          endpoint) through the non-stream scenarios; print Tally/floor ratios
  TALLY_BENCH_PIN=1       server on CPU 0, upstream and driver on CPU 1 (taskset); steadier
  TALLY_BENCH_REPEATS=N   run everything N times, alternating the target order; report medians
  TALLY_BENCH_ONLY=KEYS   only these scenarios, by letter: TALLY_BENCH_ONLY=d,e,f (p: the
                          reusable prefix, backend/bench/prefix_bench.py)
  TALLY_BENCH_OUT=FILE    save the JSON report there instead of bench/out/latest.json
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from backend.bench.prefix_bench import QUICK, PrefixRun, measure_prefix
from backend.bench.prompt_bench import measure_prompt_build
from backend.bench.report import SEED_MESSAGES, build_report, progress, render
from backend.bench.run_config import (
    BENCH,
    HOST,
    WINDOW,
    free_port,
    tally_command,
    tally_config,
    workers_config,
)
from backend.bench.scale import ARCHIVED_MESSAGES, raise_bench_files_limit
from backend.bench.scratch_database import scratch_database, workers_problem
from backend.settings import MemorySettings, Settings

OUT = BENCH / "out" / "latest.json"
DATA_SUFFIX = "-data"  # a run's data folder: its MEMORY.md files, its workspaces
# What the window holds right after an eviction: the seeded history of scenario e starts so.
WINDOW_AFTER_EVICTION = WINDOW - MemorySettings().overflow_batch


@dataclass(frozen=True, slots=True)
class Scenario:
    key: str
    label: str
    sessions: int
    turns: int  # per session
    seed: int = 0
    stream: bool = False
    workers: int = 0  # `tally serve --workers`, on PostgreSQL; 0: one process on SQLite
    archive_keep: int = 0  # seeded: all but the newest N messages archived, as after evictions
    reply_s: float = 0  # the fake model's time per measured reply


class BenchError(Exception):
    pass


def scenarios(is_quick: bool) -> list[Scenario]:
    a, b, c = (40, 10, 10) if is_quick else (200, 50, 50)
    history = f"{SEED_MESSAGES:,} seeded"
    return [
        Scenario("a", f"a: 1 × {a} sequential", 1, a),
        Scenario("a-sse", f"a: 1 × {a} sequential, SSE", 1, a, stream=True),
        Scenario("b", f"b: 8 × {b} concurrent", 8, b),
        Scenario("c", f"c: {history}, 1 × {c}", 1, c, SEED_MESSAGES),
        Scenario("c-sse", f"c: {history}, 1 × {c}, SSE", 1, c, SEED_MESSAGES, stream=True),
        *scale_scenarios(is_quick),
    ]


def scale_scenarios(is_quick: bool) -> list[Scenario]:
    sessions, turns = (8, 3) if is_quick else (64, 20)
    seeded, long_turns = (10_000, 3) if is_quick else (ARCHIVED_MESSAGES, 50)
    streams, reply_s = (20, 1.0) if is_quick else (1_000, 30.0)
    long_label = f"e: {seeded:,} seeded, 1 × {long_turns}"
    streams_label = f"f: {streams:,} SSE streams at once, {reply_s:g} s replies"
    return [
        Scenario("d", f"d: {sessions} × {turns} concurrent", sessions, turns),
        Scenario("e", long_label, 1, long_turns, seeded, archive_keep=WINDOW_AFTER_EVICTION),
        Scenario("f", streams_label, streams, 1, stream=True, reply_s=reply_s),
    ]


def chosen_scenarios(every: list[Scenario], only: str) -> list[Scenario]:
    """`TALLY_BENCH_ONLY` (letters, comma-separated) applied; all of them when it is empty."""
    letters = {part.strip() for part in only.split(",") if part.strip()}
    return [s for s in every if not letters or s.key.split("-")[0] in letters]


def workers_scenarios(is_quick: bool, workers: int) -> list[Scenario]:
    few, many = (10, 5) if is_quick else (50, 20)
    return [
        Scenario(
            f"w{w}-{sessions}",
            f"{w} worker{'s' * (w > 1)}: {sessions} × {turns}",
            sessions,
            turns,
            workers=w,
        )
        for w in range(1, workers + 1)
        for sessions, turns in ((8, few), (64, many))
    ]


def run_benchmark(settings: Settings, *, is_quick: bool, workers: int = 0) -> int:
    """Measure every scenario, print the report and save it as JSON; 1 if any turn failed.
    The bench writes its own config around the fake upstream; with `workers`, it takes the
    PostgreSQL server and Redis of `settings`."""
    problem = workers_problem(settings) if workers else None
    if problem is not None:
        print(f"tally bench: {problem}", file=sys.stderr)
        return 2
    floor = os.environ.get("TALLY_BENCH_FLOOR")
    floor_dir = str(Path(floor).resolve()) if floor else None
    if floor_dir and not (Path(floor_dir) / "floor_app.py").is_file():
        print(f"tally bench: TALLY_BENCH_FLOOR: no floor_app.py in {floor_dir}", file=sys.stderr)
        return 2
    repeats_text = os.environ.get("TALLY_BENCH_REPEATS") or "1"
    if not repeats_text.isdigit() or int(repeats_text) < 1:
        print("tally bench: TALLY_BENCH_REPEATS must be a positive number", file=sys.stderr)
        return 2
    repeats = int(repeats_text)
    pin = os.environ.get("TALLY_BENCH_PIN") == "1"
    if pin and (shutil.which("taskset") is None or (os.cpu_count() or 1) < 2):
        print("tally bench: TALLY_BENCH_PIN needs taskset and 2 CPUs; not pinning", file=sys.stderr)
        pin = False
    every = workers_scenarios(is_quick, workers) if workers else scenarios(is_quick)
    only = os.environ.get("TALLY_BENCH_ONLY") or ""
    chosen = chosen_scenarios(every, only)
    wants_prefix = not workers and (not only or "p" in only.split(","))
    if not chosen and not wants_prefix:
        print(
            "tally bench: TALLY_BENCH_ONLY names no scenario (letters: a,b,c,d,e,f,p)",
            file=sys.stderr,
        )
        return 2
    files_problem = raise_bench_files_limit(max(scenario.sessions for scenario in chosen or every))
    if files_problem:
        print(f"tally bench: warning: {files_problem}", file=sys.stderr)
    out = Path(os.environ.get("TALLY_BENCH_OUT") or OUT)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    procs = Processes(pin, settings)
    runs: list[dict[str, Any]] = []
    prefix: list[dict[str, Any]] = []
    try:
        up_url = procs.start_upstream()
        pairs = 0  # the order of Tally and the floor alternates from pair to pair (ABBA)
        for repeat in range(repeats):
            for scenario in chosen:
                # The floor is one process: beside Tally's non-stream runs of one process.
                is_floored = floor_dir and not scenario.stream and scenario.workers <= 1
                names = ["tally", "floor"] if is_floored else ["tally"]
                pairs += len(names) - 1
                for name in names if pairs % 2 else names[::-1]:
                    run = procs.measure(name, scenario, up_url, floor_dir)
                    runs.append({"repeat": repeat + 1, **run})
                    print(progress(runs[-1]), file=sys.stderr, flush=True)
        if wants_prefix:
            prefix = measure_prefix(
                lambda: procs.start_upstream(record=True, name="recording-upstream"),
                (lambda up: procs.start_floor("prefix-floor", up, floor_dir))
                if floor_dir
                else None,
                QUICK if is_quick else PrefixRun(),
            )
    except KeyboardInterrupt:
        print("tally bench: interrupted", file=sys.stderr)
        return 130
    except (BenchError, OSError, ValueError) as exc:
        print(f"tally bench: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()
        signal.signal(signal.SIGTERM, previous)
    report = build_report(runs, is_quick=is_quick, pinned=pin, repeats=repeats)
    report["prompt_build"] = measure_prompt_build()
    report["prefix"] = prefix
    print(render(report))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nSaved to {out}")
    return 1 if any(run["failed"] for run in runs) else 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the bench the way Ctrl-C does


# ---- processes -------------------------------------------------------------------------------


class Processes:
    """The upstream, the server under test and the driver: every one is stopped on every path
    out (SIGTERM, then SIGKILL). They run in sessions of their own, so a Ctrl-C reaches only
    the bench, which then stops them in order."""

    def __init__(self, pin: bool, settings: Settings) -> None:
        self.pin = pin
        self.settings = settings
        self.tmp = Path(tempfile.mkdtemp(prefix="tally-bench-"))
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.count = 0

    def start(
        self,
        name: str,
        cmd: list[str],
        *,
        cpu: str,
        env: dict[str, str] | None = None,
        stdout: int | None = None,
    ) -> subprocess.Popen[bytes]:
        with (self.tmp / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                (["taskset", "-c", cpu] if self.pin else []) + cmd,
                stdin=subprocess.DEVNULL,
                stdout=log if stdout is None else stdout,
                stderr=log,
                cwd=self.tmp,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        self.running[name] = proc
        return proc

    def start_upstream(self, *, record: bool = False, name: str = "upstream") -> str:
        """The fake upstream; with `record`, it keeps every chat request body (GET /requests)."""
        port = free_port()
        cmd = [sys.executable, str(BENCH / "upstream.py"), "--port", str(port)]
        cmd += ["--record"] if record else []
        self.wait_port(name, self.start(name, cmd, cpu="1"), port)
        return f"http://{HOST}:{port}"

    def start_floor(self, run: str, up_url: str, floor_dir: str) -> str:
        """The floor app on a database of its own, talking to `up_url`; its URL."""
        server, port = self._floor(run, up_url, floor_dir)
        self.wait_port(run, server, port)
        return f"http://{HOST}:{port}"

    def _floor(self, run: str, up_url: str, floor_dir: str) -> tuple[subprocess.Popen[bytes], int]:
        port = free_port()
        env = {"FLOOR_DB_PATH": str(self.tmp / f"{run}.db"), "LLM_BASE_URL": f"{up_url}/v1"}
        cmd = [sys.executable, str(Path(floor_dir) / "floor_app.py"), "--port", str(port)]
        return self.start(run, cmd, cpu="0", env=env), port

    def measure(
        self, name: str, scenario: Scenario, up_url: str, floor_dir: str | None
    ) -> dict[str, Any]:
        """Start a fresh server, drive it through one scenario, stop it."""
        self._settle()
        self.count += 1
        run = f"{self.count:02d}-{name}-{scenario.key}"
        db, data = self.tmp / f"{run}.db", self.tmp / f"{run}{DATA_SUFFIX}"
        if name == "floor" and floor_dir:
            server, port = self._floor(run, up_url, floor_dir)
            return self.drive(run, name, server, port, scenario, up_url, db)
        if not scenario.workers:
            config = tally_config(f"sqlite+aiosqlite:///{db}", up_url, data)
            return self.serve_and_drive(run, scenario, up_url, db, config)
        with scratch_database(self.settings.database.url, run) as url:
            config = workers_config(url, up_url, self.settings, run, data)
            return self.serve_and_drive(run, scenario, up_url, db, config)

    def _settle(self) -> None:
        """Delete what the runs before stored (their databases, their data folders) and flush
        their writes: what the kernel still had to write back of them (100,000 seeded
        messages) was paid for by the next run's commits, the more so by the target that syncs
        more often."""
        for path in self.tmp.glob("*.db*"):
            path.unlink(missing_ok=True)
        for path in self.tmp.glob(f"*{DATA_SUFFIX}"):
            shutil.rmtree(path, ignore_errors=True)
        os.sync()

    def serve_and_drive(
        self, run: str, scenario: Scenario, up_url: str, db: Path, config: dict[str, Any]
    ) -> dict[str, Any]:
        port = free_port()
        path = self.tmp / f"{run}.yaml"  # YAML is a superset of JSON
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        cmd = [*tally_command(), "serve", "--config", str(path), "--port", str(port)]
        cmd += ["--workers", str(scenario.workers)] if scenario.workers else []
        server = self.start(run, cmd, cpu="0")
        return self.drive(run, "tally", server, port, scenario, up_url, db)

    def drive(
        self,
        run: str,
        name: str,
        server: subprocess.Popen[bytes],
        port: int,
        scenario: Scenario,
        up_url: str,
        db: Path,
    ) -> dict[str, Any]:
        try:
            self.wait_port(run, server, port)
            url = f"http://{HOST}:{port}"
            drive = [sys.executable, str(BENCH / "driver.py"), "--target", name, "--url", url]
            drive += ["--upstream", up_url, "--pid", str(server.pid), "--db", str(db)]
            drive += ["--sessions", str(scenario.sessions), "--turns", str(scenario.turns)]
            drive += ["--seed", str(scenario.seed)] + (["--stream"] if scenario.stream else [])
            drive += ["--archive-keep", str(scenario.archive_keep)]
            drive += ["--reply-s", str(scenario.reply_s)]
            driver = self.start(f"{run}-driver", drive, cpu="1", stdout=subprocess.PIPE)
            out, _ = driver.communicate()
            self.running.pop(f"{run}-driver")
            if driver.returncode != 0:
                raise BenchError(f"{run}: the driver failed:\n{self.log(run + '-driver')}")
            if server.poll() is not None:
                raise BenchError(f"{run}: the server died:\n{self.log(run)}")
        finally:
            self.stop(run)
        result: dict[str, Any] = json.loads(out)
        return {"target": name, "scenario": scenario.key, "label": scenario.label, **result}

    def wait_port(self, name: str, proc: subprocess.Popen[bytes], port: int) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BenchError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
            with socket.socket() as sock:
                if sock.connect_ex((HOST, port)) == 0:
                    return
            time.sleep(0.1)
        raise BenchError(f"{name} did not open port {port} within 60 s")

    def log(self, name: str) -> str:
        text = (self.tmp / f"{name}.log").read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-25:])

    def stop(self, name: str) -> None:
        proc = self.running.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop_all(self) -> None:
        for name in reversed(list(self.running)):  # drivers and servers before the upstream
            self.stop(name)
        shutil.rmtree(self.tmp, ignore_errors=True)
