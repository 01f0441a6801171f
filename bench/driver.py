#!/usr/bin/env python3
"""Load driver for `tally bench`: one measurement against a server that is already running.

    python bench/driver.py --target tally --url http://127.0.0.1:8000 \\
        --upstream http://127.0.0.1:18080 --pid PID [--sessions 8] [--turns 50] \\
        [--seed 10000 --db PATH [--archive-keep 40]] [--stream] [--reply-s 30]

Runs warm-up turns on a session of their own, creates the sessions (and seeds their history
straight into the server's SQLite file), waits until the server is idle, then runs S sessions
concurrently, T sequential turns each. After the last turn it waits until the server is idle
again, so background work after the reply counts too. Prints one JSON object: turns/s, client
latency p50/p99, server CPU ms per turn (utime+stime from /proc), peak RSS (VmHWM), failed
turns, LLM calls per turn and prompt size (from the upstream's /stats). With --seed, one
unmeasured turn per session runs first and its cost (drain included) is reported apart as
first_turn_cpu_ms: a server may do one-off work on a history it never saw (Tally archives it).
With --archive-keep K the seeded history is left as Tally's evictions leave it instead: all but
the newest K messages archived (the window starts there, memory distilled up to it, a summary
set), so that first turn has no backlog to summarize.

--reply-s S asks the fake upstream for replies taking S seconds (a `[reply-s=S]` marker in the
measured turns' messages; warm-up and first turns stay instant), for many streams open at once.
A turn fails when its response stays silent for max(60, 2 S + 30) seconds (httpx2's read
timeout): Tally sends a keep-alive comment while a started stream is quiet.
The driver raises its own open-file limit to the hard limit. Besides the figures above it
reports wall_s, start_rss_mb (the server's RSS when the measured phase began) and, streamed,
first_byte_p50_ms/p99 (until the response began: Tally starts it once the turn has started).

Targets: `tally` (POST /api/chat/sessions, POST /api/chat/send, JSON or SSE) and `floor`
(POST /chat {session_id, message} -> {reply}; rows go to messages(session_id, role, content,
created_at)). Only loopback URLs are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import os
import resource
import sqlite3
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlparse

import httpx2

CLK_TCK = os.sysconf("SC_CLK_TCK")


class TurnError(Exception):
    pass


class Driver:
    def __init__(self, args: argparse.Namespace, client: httpx2.AsyncClient) -> None:
        self.args = args
        self.client = client
        self.url = args.url.rstrip("/")
        self.is_floor = args.target == "floor"

    async def create_session(self) -> str:
        if self.is_floor:  # the floor's sessions are plain ids
            return f"floor-{uuid.uuid4().hex[:12]}"
        response = await self.client.post(f"{self.url}/api/chat/sessions", json={})
        if response.status_code != 201:
            raise TurnError(f"creating a session: HTTP {response.status_code}: {response.text}")
        session_id: str = response.json()["id"]
        return session_id

    async def turn(self, sid: str, text: str) -> float | None:
        """One whole turn. It counts when it returns 200 with a non-empty reply or, streamed,
        when the stream ends with turn.completed; anything else raises TurnError. Streamed,
        returns the seconds until the response began (its status and headers)."""
        body: dict[str, Any] = {"session_id": sid, "message": text}
        url = self.url + ("/chat" if self.is_floor else "/api/chat/send")
        if not self.args.stream:
            response = await self.client.post(url, json=body)
            if response.status_code != 200:
                raise TurnError(f"HTTP {response.status_code}: {response.text[:200]}")
            if not response.json().get("reply"):
                raise TurnError("empty reply")
            return None
        event, start = "", time.perf_counter()
        async with self.client.stream("POST", url, json={**body, "stream": True}) as response:
            began = time.perf_counter() - start
            if response.status_code != 200:
                raise TurnError(f"HTTP {response.status_code}: {(await response.aread())[:200]!r}")
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif event == "error" and line.startswith("data:"):
                    raise TurnError(f"event: error {line[5:200]}")
        if event != "turn.completed":
            raise TurnError(f"the stream ended with {event or 'no event'!r}, not turn.completed")
        return began

    def seed(self, sids: list[str], count: int) -> None:
        """Alternating user/assistant rows (a turn id per pair), inserted with the sqlite3 module
        while the server runs (WAL), then checkpointed so the server does not pay for it."""
        base = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=1)
        con = sqlite3.connect(self.args.db, timeout=30)
        try:
            with con:
                for sid in sids:
                    rows = []
                    for i in range(count):
                        role = "user" if i % 2 == 0 else "assistant"
                        content = message(0, i) if role == "user" else f"Seeded reply {i}. " * 6
                        at = (base + timedelta(milliseconds=i)).strftime("%Y-%m-%d %H:%M:%S.%f")
                        rows.append((sid, role, content, f"seed-{sid[:8]}-{i // 2}", at))
                    if self.is_floor:
                        con.executemany(
                            "INSERT INTO messages (session_id, role, content, created_at) "
                            "VALUES (?, ?, ?, ?)",
                            [(s, r, c, at) for s, r, c, _, at in rows],
                        )
                    else:
                        con.executemany(
                            "INSERT INTO messages (tenant_id, session_id, role, content, parts, "
                            "turn_id, status, token_count, idempotency_key, created_at) "
                            "VALUES ('default', ?, ?, ?, NULL, ?, 'complete', NULL, NULL, ?)",
                            rows,
                        )
                        if self.args.archive_keep:
                            archive(con, sid, keep=self.args.archive_keep)
            con.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            con.close()

    async def upstream_stats(self) -> dict[str, int]:
        response = await self.client.get(self.args.upstream.rstrip("/") + "/stats")
        response.raise_for_status()
        stats: dict[str, int] = response.json()
        return stats

    async def quiesce(self, limit_s: float = 20) -> float:
        """Wait until the server is idle: no new LLM call and under 4 % CPU in two 0.25 s
        windows in a row. Returns the seconds waited."""
        start = time.perf_counter()
        calls, cpu, idle = (await self.upstream_stats())["chat_total"], self.cpu(), 0
        while idle < 2 and time.perf_counter() - start < limit_s:
            await asyncio.sleep(0.25)
            now_calls, now_cpu = (await self.upstream_stats())["chat_total"], self.cpu()
            idle = idle + 1 if now_calls == calls and now_cpu - cpu < 0.01 else 0
            calls, cpu = now_calls, now_cpu
        return time.perf_counter() - start

    def cpu(self) -> float:
        """utime + stime of the server and its worker processes, all threads, in seconds."""
        total = 0
        for pid in self.server_pids():
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / CLK_TCK

    def rss_mb(self, field: str = "VmHWM") -> float | None:
        """The server's peak RSS (VmHWM) or RSS now (VmRSS), summed over its processes."""
        if not self.args.pid:
            return None
        kb = 0
        for pid in self.server_pids():
            with open(f"/proc/{pid}/status", encoding="ascii") as f:
                kb += next((int(ln.split()[1]) for ln in f if ln.startswith(f"{field}:")), 0)
        return round(kb / 1024, 1)

    def server_pids(self) -> list[int]:
        """--pid and its descendants (`tally serve --workers` forks its workers)."""
        pids, i = ([self.args.pid] if self.args.pid else []), 0
        while i < len(pids):
            for task in os.listdir(f"/proc/{pids[i]}/task"):
                with open(f"/proc/{pids[i]}/task/{task}/children", encoding="ascii") as f:
                    pids += [int(child) for child in f.read().split()]
            i += 1
        return pids


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    limits = httpx2.Limits(max_connections=args.sessions + 4)
    timeout = max(60.0, 2 * args.reply_s + 30)
    async with httpx2.AsyncClient(timeout=timeout, limits=limits) as client:
        driver = Driver(args, client)
        warm = await driver.create_session()
        for i in range(args.warmup):
            try:
                await driver.turn(warm, message(99, i))
            except (TurnError, httpx2.HTTPError) as exc:
                raise TurnError(f"warm-up turn {i + 1} failed: {exc}") from exc
        sids: list[str] = []
        while len(sids) < args.sessions:  # 50 at a time: a thousand take a while one by one
            batch = min(50, args.sessions - len(sids))
            sids += await asyncio.gather(*(driver.create_session() for _ in range(batch)))
        catch_up: dict[str, Any] = {}
        if args.seed:
            driver.seed(sids, args.seed)
            await driver.quiesce()
            # One unmeasured turn per seeded session: whatever the server does once about a
            # history it has never seen (archiving, summaries) happens here, not in the table.
            stats0, cpu0 = await driver.upstream_stats(), driver.cpu()
            for i, sid in enumerate(sids):
                await driver.turn(sid, message(i, -1))
            await driver.quiesce()
            stats1, cpu1 = await driver.upstream_stats(), driver.cpu()
            catch_up = {
                "first_turn_cpu_ms": round((cpu1 - cpu0) * 1000 / len(sids), 1),
                "first_turn_llm_calls": (stats1["chat_total"] - stats0["chat_total"]) / len(sids),
            }
        await driver.quiesce()

        latencies: list[float] = []
        first_bytes: list[float] = []  # streamed: ms until the response began
        errors: list[str] = []
        slow = f" [reply-s={args.reply_s:g}]" if args.reply_s else ""

        async def session(index: int, sid: str) -> None:
            for t in range(args.turns):
                start = time.perf_counter()
                try:
                    began = await driver.turn(sid, message(index, t) + slow)
                    latencies.append((time.perf_counter() - start) * 1000)
                    if began is not None:
                        first_bytes.append(began * 1000)
                except (TurnError, httpx2.HTTPError) as exc:
                    errors.append(f"s{index} t{t}: {type(exc).__name__}: {exc}"[:300])

        stats0, cpu0, rss0 = await driver.upstream_stats(), driver.cpu(), driver.rss_mb("VmRSS")
        own0, start = time.process_time(), time.perf_counter()
        await asyncio.gather(*(session(i, sid) for i, sid in enumerate(sids)))
        wall = time.perf_counter() - start
        own_util = (time.process_time() - own0) / wall
        drain = await driver.quiesce()
        stats1, cpu1 = await driver.upstream_stats(), driver.cpu()
        rss = driver.rss_mb()
    ok, calls = len(latencies), stats1["chat_total"] - stats0["chat_total"]
    prompt_bytes = stats1["prompt_bytes"] - stats0["prompt_bytes"]
    return {
        "turns": args.sessions * args.turns,
        "ok": ok,
        "failed": len(errors),
        "turns_per_s": round(ok / wall, 2),
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "first_byte_p50_ms": percentile(first_bytes, 0.50),
        "first_byte_p99_ms": percentile(first_bytes, 0.99),
        "cpu_ms_per_turn": round((cpu1 - cpu0) * 1000 / ok, 2) if ok and args.pid else None,
        "peak_rss_mb": rss,
        "start_rss_mb": rss0,
        "wall_s": round(wall, 2),
        "llm_calls_per_turn": round(calls / ok, 3) if ok else None,
        "prompt_kb_per_call": round(prompt_bytes / 1024 / calls, 2) if calls else None,
        "drain_s": round(drain, 2),
        "driver_cpu_util": round(own_util, 3),
        "errors": errors[:5],
        **catch_up,
    }


SEEDED_SUMMARY = (
    "The user has spent a long conversation naming favourite numbers, one per message, and "
    "asking for a fact about each; the assistant answered every time with one short fact. "
    "No other topic came up, and the user never asked to forget anything."
)


def archive(con: sqlite3.Connection, sid: str, *, keep: int) -> None:
    """Leave a seeded session as Tally's evictions would: its window starts at a user message
    among the newest `keep`, everything older is archived and distilled into memory (the
    watermark), and a rolling summary stands for it."""
    owned = "tenant_id = 'default' AND session_id = ?"
    (start,) = con.execute(
        f"SELECT MIN(id) FROM (SELECT id, role FROM messages WHERE {owned} "
        "ORDER BY id DESC LIMIT ?) WHERE role = 'user'",
        (sid, keep),
    ).fetchone()
    (watermark,) = con.execute(
        f"SELECT COALESCE(MAX(id), 0) FROM messages WHERE {owned} AND id < ?", (sid, start)
    ).fetchone()
    con.execute(
        "UPDATE sessions SET window_start_id = ?, memory_watermark_id = ?, summary = ? "
        "WHERE tenant_id = 'default' AND id = ?",
        (start, watermark, SEEDED_SUMMARY, sid),
    )


def raise_open_files() -> None:
    """A thousand streams need a thousand sockets: the soft limit goes up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(soft, 65536) if hard == resource.RLIM_INFINITY else hard
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def message(session: int, turn: int) -> str:
    """About 110 characters, like the fake upstream's reply."""
    number = (session * 7919 + turn * 104729) % 100_000
    return (
        f"[s{session} t{turn}] Please remember that my favourite number is {number} "
        "and tell me one fact about it."
    )


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (k - low), 2)


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--target", choices=["tally", "floor"], default="tally")
    parser.add_argument("--url", required=True, help="the server's base URL")
    parser.add_argument("--upstream", required=True, help="the fake upstream's base URL")
    parser.add_argument("--pid", type=int, help="the server's pid, for CPU and RSS")
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--turns", type=int, default=50, help="turns per session")
    parser.add_argument("--seed", type=int, default=0, help="messages seeded per session")
    parser.add_argument("--db", help="the server's SQLite file (needed to seed)")
    parser.add_argument(
        "--archive-keep",
        type=int,
        default=0,
        help="seeded: archive all but the newest N messages, as Tally's evictions would",
    )
    parser.add_argument("--stream", action="store_true", help="read the reply as SSE")
    parser.add_argument(
        "--reply-s", type=float, default=0, help="measured replies take this long upstream"
    )
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if not (is_loopback(args.url) and is_loopback(args.upstream)):
        parser.error("only loopback URLs are accepted")
    if args.seed and not args.db:
        parser.error("--seed needs --db")
    if args.archive_keep and not args.seed:
        parser.error("--archive-keep needs --seed")
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    raise_open_files()
    try:
        result = asyncio.run(measure(args))
    except (TurnError, httpx2.HTTPError, OSError, sqlite3.Error) as exc:
        print(f"driver: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
