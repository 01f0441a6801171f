"""Crash tests (docs/operations.md, reliability H): the real server in a subprocess, killed with
SIGKILL, restarted.

`TallyProcess` runs `python -m backend serve` against a config written into the test's
tmp_path, answering through an in-process fake OpenAI upstream. The SQLite file is read with
the `sqlite3` module, the way an operator would look at it after a crash.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import yaml

from tests.conftest import ROOT, VENDOR_ENV
from tests.waiting import until_blocking

MAX_HISTORY_MESSAGES = 4
OVERFLOW_BATCH = 2  # with 4 messages kept, the 3rd turn (6 messages) starts an overflow job
# Deadlines on conditions, generous for a busy 2-core machine: a passing run takes a second.
START_TIMEOUT_S = 120.0
RESUME_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ServerFiles:
    """Everything one test's server keeps, under one directory."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def database(self) -> Path:
        return self.root / "t.db"

    @property
    def memory(self) -> Path:
        return self.root / "MEMORY.md"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"


def write_config(root: Path, *, upstream_url: str) -> ServerFiles:
    """A config for a small window (4 messages, batch 2) answered by the fake upstream."""
    files = ServerFiles(root)
    config = {
        "database": {"url": f"sqlite+aiosqlite:///{files.database}"},
        "providers": {
            "fake": {"kind": "openai_compatible", "base_url": upstream_url, "max_retries": 0}
        },
        "model": {"provider": "fake", "name": "gpt-4o-mini"},
        "persona": {"max_history_messages": MAX_HISTORY_MESSAGES},
        "memory": {
            "path": str(files.memory),
            "overflow_batch": OVERFLOW_BATCH,
            "retry_base_s": 0.05,
        },
        "prompts_dir": str(ROOT / "prompts"),
        "data_dir": str(files.data_dir),
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class TallyProcess:
    """One `python -m backend serve` process. The `with` block waits for `/api/health` and
    always ends the process (SIGTERM, then SIGKILL) unless it has died already."""

    def __init__(
        self,
        files: ServerFiles,
        *,
        failpoints: tuple[str, ...] = (),
        serve_args: tuple[str, ...] = (),
    ) -> None:
        self.files = files
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in (*VENDOR_ENV, "TALLY_FAILPOINTS")}
        if failpoints:
            env["TALLY_FAILPOINTS"] = ",".join(failpoints)
        command = [sys.executable, "-m", "backend", "--config", str(files.config)]
        command += ["serve", "--port", str(self.port), *serve_args]
        with files.log.open("a", encoding="utf-8") as log:
            log.write(f"\n==== {' '.join(command[1:])} (failpoints: {failpoints or 'none'})\n")
            log.flush()
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def __enter__(self) -> Self:
        try:
            self._wait_until_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=60)

    def kill(self) -> None:
        """`kill -9` from outside, as a crashing host would."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def wait_for_exit(self, timeout_s: float) -> int | None:
        """The exit code, or None if the process still runs after `timeout_s`."""
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        if self.wait_for_exit(15) is None:
            self.process.kill()
            self.process.wait(10)

    def log_tail(self, lines: int = 30) -> str:
        text = self.files.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _wait_until_healthy(self) -> None:
        until_blocking(
            self._healthy,
            lambda: f"the server answering /api/health:\n{self.log_tail()}",
            timeout_s=START_TIMEOUT_S,
            poll_s=0.05,
        )

    def _healthy(self) -> bool:
        """Whether /api/health answers 200; an error once the process has exited."""
        if self.process.poll() is not None:
            raise AssertionError(
                f"the server exited with {self.process.returncode} while starting:\n"
                + self.log_tail()
            )
        try:
            return httpx.get(f"{self.base_url}/api/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False


# ---- the HTTP API -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnsweredTurn:
    """A turn the client saw answered: both of its messages must stay stored."""

    user_message_id: int
    user_text: str
    assistant_message_id: int
    reply: str


def create_session(client: httpx.Client) -> str:
    response = client.post("/api/chat/sessions", json={})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def send_turn(
    client: httpx.Client, session_id: str, text: str, *, idempotency_key: str | None = None
) -> dict[str, Any]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    response = client.post(
        "/api/chat/send", json={"session_id": session_id, "message": text}, headers=headers
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def answered(text: str, body: dict[str, Any]) -> AnsweredTurn:
    return AnsweredTurn(body["user_message_id"], text, body["assistant_message_id"], body["reply"])


def sse_events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) pairs of a streamed turn, as they arrive."""
    name, data = "", ""
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data += line.removeprefix("data:").strip()
        elif line == "" and name:
            yield name, json.loads(data)
            name, data = "", ""


# ---- the database, read directly -----------------------------------------------------------------


def query(database: Path, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
    with closing(sqlite3.connect(database, timeout=30)) as db:
        db.row_factory = sqlite3.Row
        return list(db.execute(sql, params))


def copy_database(database: Path, into: Path) -> Path:
    """A copy of the database file and its WAL, so reading it leaves the original exactly as
    the crash left it for the restarted server to recover."""
    into.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        source = database.with_name(database.name + suffix)
        if source.exists():
            shutil.copy2(source, into / source.name)
    return into / database.name


def lost_messages(database: Path, turns: list[AnsweredTurn]) -> list[str]:
    """Each answered turn's message that is not stored as it was answered."""
    stored = {
        row["id"]: row for row in query(database, "SELECT id, role, content, status FROM messages")
    }
    expected = [(t.user_message_id, "user", t.user_text) for t in turns]
    expected += [(t.assistant_message_id, "assistant", t.reply) for t in turns]
    lost = []
    for message_id, role, content in expected:
        row = stored.get(message_id)
        actual = None if row is None else (row["role"], row["content"], row["status"])
        if actual != (role, content, "complete"):
            lost.append(f"{role} message {message_id} ({content!r}), stored as {actual}")
    return lost


def wait_until_resumed(database: Path, *, timeout_s: float = RESUME_TIMEOUT_S) -> None:
    """Until the restarted server has finished every job the crash left unfinished. A resumed
    job needs one call to the local fake and a few writes: well under a second when idle."""
    _wait_for_summarizer(database, None, timeout_s, "finish the jobs left by the crash")


def wait_until_settled(
    database: Path, session_id: str, *, timeout_s: float = SETTLE_TIMEOUT_S
) -> None:
    """Until the summarizer is idle for `session_id` after a turn: no unfinished job, and the
    window within `max_history_messages`, so no job is about to be planned either."""
    _wait_for_summarizer(database, session_id, timeout_s, "settle")


def _wait_for_summarizer(
    database: Path, session_id: str | None, timeout_s: float, goal: str
) -> None:
    last: list[sqlite3.Row] = []  # the last row read, for the failure's message

    def idle() -> bool:
        (row,) = query(
            database,
            "SELECT"
            " (SELECT count(*) FROM overflow_jobs WHERE status IN"
            " ('pending', 'summarized', 'memory_written')) AS unfinished,"
            " (SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id"
            "  WHERE s.id = ? AND m.id >= s.window_start_id) AS window",
            (session_id,),
        )
        last[:] = [row]
        return bool(row["unfinished"] == 0 and row["window"] <= MAX_HISTORY_MESSAGES)

    def busy() -> str:
        (row,) = last
        jobs = query(database, "SELECT id, status, attempts, last_error FROM overflow_jobs")
        window = f", {row['window']} messages in the window" if session_id else ""
        return (
            f"the summarizer to {goal}: {row['unfinished']}"
            f" unfinished job(s){window}; journal: {[dict(job) for job in jobs]}"
        )

    until_blocking(idle, busy, timeout_s=timeout_s, poll_s=0.05)


# ---- reporting -----------------------------------------------------------------------------------


@dataclass
class Case:
    items_lost: int = 0


@dataclass
class Figure:
    """A figure of the reliability table (docs/operations.md): cases tried, faults survived, items
    lost."""

    group: str
    tried: int = 0
    survived: int = 0
    lost: int = 0

    @contextmanager
    def case(self) -> Iterator[Case]:
        """One fault injected; it counts as survived when the block raises nothing."""
        case = Case()
        self.tried += 1
        try:
            yield case
        finally:
            self.lost += case.items_lost
        self.survived += 1

    def line(self) -> str:
        return (
            f"\n{self.group}: cases tried {self.tried}, faults survived {self.survived},"
            f" items lost {self.lost}"
        )
