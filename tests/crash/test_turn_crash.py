"""`kill -9` while a turn streams, then a restart (docs/operations.md, reliability H, G): the user
message is stored once, no fake-complete reply exists, the next turn works, and a client retrying
with the same `Idempotency-Key` resumes the unanswered turn instead of storing its message again.

The fake upstream holds the model call open (before its first word, or after a few words), so
the test decides exactly when the server dies: right after an SSE event has reached the client.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from tests.crash import (
    AnsweredTurn,
    Case,
    Figure,
    ServerFiles,
    TallyProcess,
    answered,
    copy_database,
    create_session,
    lost_messages,
    query,
    send_turn,
    sse_events,
    wait_until_settled,
    write_config,
)
from tests.fakes import Answer, Delay, RecordedRequest, Reply, Step, words
from tests.fakes.openai_server import FakeOpenAIServer
from tests.invariants import check_invariants
from tests.waiting import until_blocking

pytestmark = pytest.mark.process

HOLD_S = 60.0  # far longer than any test: the model call never finishes by itself


@dataclass(frozen=True)
class HeldStream:
    """Stream the words of `text`, then hold the stream open without ever finishing it."""

    text: str
    hold_s: float = HOLD_S


class HoldingOpenAIServer(FakeOpenAIServer):
    """The fake OpenAI server, plus the `HeldStream` step."""

    def hold(self, step: Delay | HeldStream) -> None:
        """Queue a model call that never finishes by itself."""
        self.push(cast(Step, step))  # `answer` below plays the one step the base cannot

    async def answer(
        self, step: Answer | HeldStream, request: RecordedRequest, reply: Reply
    ) -> None:
        if not isinstance(step, HeldStream):
            await super().answer(step, request, reply)
            return
        await reply.start_stream()
        for piece in words(step.text):
            choice = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
            chunk = {"id": "chatcmpl-held", "object": "chat.completion.chunk", "created": 0}
            chunk |= {"model": request.body["model"], "choices": [choice]}
            await reply.send(f"data: {json.dumps(chunk)}\n\n")
        await asyncio.sleep(step.hold_s)
        reply.cut()


# The SSE event after which the server is killed, and the model call that keeps it waiting there.
HELD_CALLS: dict[str, Delay | HeldStream] = {
    "turn.started": Delay(HOLD_S),  # the user message is stored; the model has said nothing
    "text.delta": HeldStream("the first words of a reply that never ends"),  # mid-stream
}


@pytest.fixture(scope="module")
def figure() -> Iterator[Figure]:
    figure = Figure("H. crashes: kill -9 during a streamed turn")
    yield figure
    print(figure.line())


@pytest.fixture
def upstream() -> Iterator[HoldingOpenAIServer]:
    with HoldingOpenAIServer() as server:
        yield server


def stream_until_killed(
    server: TallyProcess,
    client: httpx.Client,
    body: dict[str, Any],
    *,
    upstream: HoldingOpenAIServer,
    kill_after: str,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Stream a turn whose model call `upstream` holds open, and SIGKILL the server as soon as
    `kill_after` has arrived and the held call has reached the upstream (`turn.started` comes
    before the model call); return the data of `turn.started` (turn and user message ids)."""
    calls_before = len(upstream.requests)
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    started: dict[str, Any] | None = None
    seen = []
    with client.stream(
        "POST", "/api/chat/send", json={**body, "stream": True}, headers=headers
    ) as response:
        assert response.status_code == 200, response.read()
        for name, data in sse_events(response):
            seen.append(name)
            if name == "turn.started":
                started = data
            if name == kill_after:
                until_blocking(lambda: len(upstream.requests) > calls_before, "the model call")
                server.kill()
                break
    assert server.returncode == -signal.SIGKILL, f"the server was not killed; events: {seen}"
    assert started is not None, f"no turn.started before the kill; events: {seen}"
    return started


def messages_of_turn(database: Path, turn_id: str) -> list[Any]:
    return query(
        database, "SELECT id, role, status, content FROM messages WHERE turn_id = ?", (turn_id,)
    )


@dataclass
class KilledTurn:
    """A session whose last turn died with the server, as the crash left it."""

    files: ServerFiles
    session_id: str
    text: str
    turn_id: str
    user_message_id: int
    answered: list[AnsweredTurn]


def kill_a_streamed_turn(
    tmp_path: Path,
    upstream: HoldingOpenAIServer,
    *,
    kill_after: str,
    idempotency_key: str | None = None,
) -> KilledTurn:
    """One answered turn, then a streamed one killed after `kill_after`. Checks what the crash
    left: the killed turn's user message stored once, and no reply at all."""
    files = write_config(tmp_path, upstream_url=upstream.base_url)
    text = "a question the server dies answering"
    with TallyProcess(files) as server, server.client() as client:
        session_id = create_session(client)
        first = answered("hello", send_turn(client, session_id, "hello"))
        upstream.hold(HELD_CALLS[kill_after])
        started = stream_until_killed(
            server,
            client,
            {"session_id": session_id, "message": text},
            upstream=upstream,
            kill_after=kill_after,
            idempotency_key=idempotency_key,
        )
    killed = KilledTurn(
        files, session_id, text, started["turn_id"], started["user_message_id"], [first]
    )
    assert_unanswered(copy_database(files.database, tmp_path / "at-crash"), killed)
    return killed


def assert_unanswered(database: Path, killed: KilledTurn) -> None:
    stored = [
        (m["id"], m["role"], m["content"]) for m in messages_of_turn(database, killed.turn_id)
    ]
    assert stored == [(killed.user_message_id, "user", killed.text)], (
        "the killed turn must hold its user message once and no reply"
    )


def assert_nothing_lost(killed: KilledTurn, case: Case) -> None:
    lost = lost_messages(killed.files.database, killed.answered)
    case.items_lost = len(lost)
    assert not lost, f"answered messages lost: {lost}"
    check_invariants(killed.files.database, killed.files.memory, data_dir=killed.files.data_dir)


def send_next_turn(client: httpx.Client, killed: KilledTurn) -> None:
    text = "are you back?"
    reply = send_turn(client, killed.session_id, text)
    assert reply["reply"] == f"ok: {text}"
    killed.answered.append(answered(text, reply))


def test_a_turn_killed_before_its_first_word_is_stored_once_and_the_next_turn_works(
    tmp_path: Path, upstream: HoldingOpenAIServer, figure: Figure
) -> None:
    with figure.case() as case:
        killed = kill_a_streamed_turn(tmp_path, upstream, kill_after="turn.started")
        with TallyProcess(killed.files) as server, server.client() as client:
            send_next_turn(client, killed)
        assert_unanswered(killed.files.database, killed)
        assert_nothing_lost(killed, case)


def test_a_retry_with_the_same_idempotency_key_resumes_a_turn_killed_mid_stream(
    tmp_path: Path, upstream: HoldingOpenAIServer, figure: Figure
) -> None:
    key = "retry-after-crash-1"
    with figure.case() as case:
        killed = kill_a_streamed_turn(
            tmp_path, upstream, kill_after="text.delta", idempotency_key=key
        )
        with TallyProcess(killed.files) as server, server.client() as client:
            retry = send_turn(client, killed.session_id, killed.text, idempotency_key=key)
            assert (retry["turn_id"], retry["user_message_id"]) == (
                killed.turn_id,
                killed.user_message_id,
            ), "the retry must resume the stored turn, not start a new one"
            assert retry["reply"] == f"ok: {killed.text}"
            killed.answered.append(answered(killed.text, retry))
            replay = send_turn(client, killed.session_id, killed.text, idempotency_key=key)
            assert replay["assistant_message_id"] == retry["assistant_message_id"]
            send_next_turn(client, killed)
            wait_until_settled(killed.files.database, killed.session_id)
        stored = messages_of_turn(killed.files.database, killed.turn_id)
        assert [(m["role"], m["status"]) for m in stored] == [
            ("user", "complete"),
            ("assistant", "complete"),
        ]
        assert_nothing_lost(killed, case)


def test_a_late_retry_after_a_newer_turn_is_refused_not_misanswered(
    tmp_path: Path, upstream: HoldingOpenAIServer, figure: Figure
) -> None:
    key = "late-retry-1"
    with figure.case() as case:
        killed = kill_a_streamed_turn(
            tmp_path, upstream, kill_after="text.delta", idempotency_key=key
        )
        with TallyProcess(killed.files) as server, server.client() as client:
            send_next_turn(client, killed)
            assert_unanswered(killed.files.database, killed)
            response = client.post(
                "/api/chat/send",
                json={"session_id": killed.session_id, "message": killed.text},
                headers={"Idempotency-Key": key},
            )
        # Answering it now would reply to the newer turn: the stale retry is refused.
        assert response.status_code == 409, response.text
        assert response.json()["error"]["code"] == "turn_superseded"
        assert_nothing_lost(killed, case)
