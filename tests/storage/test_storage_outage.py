"""A storage outage answers 503 and keeps the connection (issue 30; docs/operations.md, reliability
E, H).

The database is a throwaway PostgreSQL cluster of the test's own, stopped and started again
(never the shared server). Requests go over keep-alive HTTP/1.1 connections read byte by byte,
so every answer is counted and a connection the server drops is seen as such: every request
gets an HTTP answer (503 `storage_unavailable` while the database is down), no connection is
reset, and each fault is one log line without a traceback. After the restart nothing answered
200 is lost or stored twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve
from tests.storage.postgres_cluster import Cluster, throwaway_cluster

# A PostgreSQL cluster of its own, started and stopped as processes (pg_ctl).
pytestmark = [pytest.mark.postgres, pytest.mark.process]

FIGURE = {"requests": 0, "answered": 0, "answered_503": 0, "resets": 0, "lost": 0}
WAIT_S = 120.0  # a condition's deadline on two busy cores; never a sleep


@pytest.fixture(scope="module", autouse=True)
def figure() -> Iterator[None]:
    yield
    print(
        f"\nstorage outage: {FIGURE['requests']} requests, {FIGURE['answered']} answered "
        f"({FIGURE['answered_503']} with 503), {FIGURE['resets']} resets, {FIGURE['lost']} lost"
    )


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with throwaway_cluster() as started:
        yield started


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


class KeepAlive:
    """One HTTP/1.1 connection, kept open across requests. An answer is read whole (by its
    Content-Length); a connection the server closed, or says it will close, is a reset."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.is_closed = False

    @classmethod
    async def open(cls, port: int) -> KeepAlive:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, method: str, path: str, body: object = None) -> Answer | None:
        """The answer, or None when the connection was dropped instead (counted as a reset)."""
        FIGURE["requests"] += 1
        answer = None if self.is_closed else await self._exchange(method, path, body)
        FIGURE["answered"] += answer is not None
        FIGURE["answered_503"] += answer is not None and answer.status == 503
        FIGURE["resets"] += answer is None
        return answer

    async def _exchange(self, method: str, path: str, body: object) -> Answer | None:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(data)}\r\n"
        kind = "Content-Type: application/json\r\n" if body is not None else ""
        try:
            self._writer.write(f"{head}{kind}\r\n".encode() + data)
            await self._writer.drain()
            status_line = await self._reader.readline()
            if not status_line:
                raise ConnectionResetError("closed before an answer")
            headers: dict[str, str] = {}
            while (line := await self._reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            payload = await self._reader.readexactly(int(headers.get("content-length", "0")))
        except (OSError, asyncio.IncompleteReadError):
            self.is_closed = True
            return None
        if headers.get("connection", "").lower() == "close":
            self.is_closed = True
        return Answer(int(status_line.split()[1]), json.loads(payload or b"{}"), headers)

    async def close(self) -> None:
        self._writer.close()
        await asyncio.gather(self._writer.wait_closed(), return_exceptions=True)


class Records(logging.Handler):
    """Every log record of the app and of the server (uvicorn's do not reach the root)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def problems(self) -> list[logging.LogRecord]:
        return [r for r in self.records if r.levelno >= logging.WARNING]


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    watched = [
        logging.getLogger(),
        logging.getLogger("uvicorn"),
        logging.getLogger("uvicorn.error"),
    ]
    for logger in watched:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in watched:
            logger.removeHandler(handler)


def is_503(answer: Answer | None) -> bool:
    return (
        answer is not None
        and answer.status == 503
        and answer.body["error"]["code"] == "storage_unavailable"
        and int(answer.headers["retry-after"]) >= 1
    )


async def test_requests_while_postgresql_is_down_are_answered_503_on_one_connection(
    cluster: Cluster, tmp_path: Path, records: Records
) -> None:
    app = create_app(
        make_settings(cluster.url, tmp_path), provider=ScriptedProvider(replies=["ok"])
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        connection = await KeepAlive.open(client.base_url.port or 0)
        before = await connection.request("GET", "/api/chat/sessions")
        await asyncio.to_thread(cluster.stop, "fast")
        records.records.clear()
        down = []
        for round_ in range(5):
            for method, path, body in (
                ("GET", "/api/chat/sessions", None),
                ("POST", "/api/chat/sessions", {"title": f"t{round_}"}),
                ("GET", f"/api/chat/sessions/{session_id}/messages", None),
                ("GET", f"/api/chat/sessions/{session_id}/tool-conversations", None),
                ("POST", "/api/chat/send", {"session_id": session_id, "message": f"m{round_}"}),
                ("POST", "/api/chat/send", {"message": "a new session"}),
            ):
                down.append(await connection.request(method, path, body))
        logged = records.problems()
        await asyncio.to_thread(cluster.start)
        after = await connection.request(
            "POST", "/api/chat/send", {"session_id": session_id, "message": "back"}
        )
        await connection.close()

    assert before is not None and before.status == 200
    assert [a for a in down if not is_503(a)] == []  # every one answered, none reset
    assert after is not None and after.status == 200, after
    assert len(logged) == len(down), [r.getMessage() for r in logged]  # one line a fault
    assert [r for r in logged if r.exc_info or r.name.startswith("uvicorn")] == []


async def test_a_postgresql_restart_under_load_leaves_no_request_unanswered(
    cluster: Cluster, tmp_path: Path, records: Records
) -> None:
    clients, turns_each = 6, 12
    app = create_app(
        make_settings(cluster.url, tmp_path), provider=ScriptedProvider(replies=["ok"])
    )
    async with serve(app) as client:
        port = client.base_url.port or 0
        sessions = [
            (await client.post("/api/chat/sessions", json={})).json()["id"] for _ in range(clients)
        ]
        outcomes: dict[str, list[tuple[str, Answer | None]]] = {s: [] for s in sessions}
        saw_outage = {s: asyncio.Event() for s in sessions}
        restarted = asyncio.Event()

        async def talk(session_id: str) -> None:
            connection = await KeepAlive.open(port)
            try:
                for n in range(turns_each):
                    if n == turns_each // 2:  # half way: until the restart is over
                        await restarted.wait()
                    message = f"{session_id[:8]} turn {n}"
                    body = {"session_id": session_id, "message": message}
                    answer = await connection.request("POST", "/api/chat/send", body)
                    outcomes[session_id].append((message, answer))
                    if is_503(answer):
                        saw_outage[session_id].set()
                    if connection.is_closed:
                        return
            finally:
                await connection.close()

        async def restart() -> None:
            await asyncio.to_thread(cluster.stop, "fast")
            async with asyncio.timeout(WAIT_S):  # every client met the outage
                await asyncio.gather(*(event.wait() for event in saw_outage.values()))
            await asyncio.to_thread(cluster.start)
            restarted.set()

        async with asyncio.timeout(WAIT_S * 2):
            await asyncio.gather(restart(), *(talk(s) for s in sessions))
        stored = {
            s: (await client.get(f"/api/chat/sessions/{s}/messages")).json()["messages"]
            for s in sessions
        }

    answers = [answer for said in outcomes.values() for _, answer in said]
    assert len(answers) == clients * turns_each  # no client stopped early: none was reset
    assert [a for a in answers if a is None or a.status not in (200, 503)] == []
    assert sum(is_503(a) for a in answers) >= clients
    for session_id, said in outcomes.items():
        contents = [(m["role"], m["content"]) for m in stored[session_id]]
        answered = [m for m, a in said if a is not None and a.status == 200]
        missing = [m for m in answered if ("user", m) not in contents]
        FIGURE["lost"] += len(missing)
        assert missing == []
        users = [content for role, content in contents if role == "user"]
        assert len(users) == len(set(users))  # no user message twice
        assert contents.count(("assistant", "ok")) == len(answered)
    assert [r for r in records.problems() if r.exc_info or r.name.startswith("uvicorn")] == []
