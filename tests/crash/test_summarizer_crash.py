"""`kill -9` at each journaled step of the overflow summarizer, then a restart (docs/operations.md,
reliability H): every evicted range is covered by exactly one memory line, no message is lost,
MEMORY.md parses.

The server runs as a subprocess with `TALLY_FAILPOINTS=<step>`, so it SIGKILLs itself right
after that step is durable; the restarted server (no failpoints) resumes the job on start-up.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.crash import (
    AnsweredTurn,
    Figure,
    TallyProcess,
    answered,
    copy_database,
    create_session,
    lost_messages,
    query,
    send_turn,
    wait_until_resumed,
    wait_until_settled,
    write_config,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

# Each failpoint and the status its job is journaled with when the process dies there.
STATUS_AT_FAILPOINT = {
    "overflow.summarized": "summarized",
    "overflow.memory_written": "memory_written",
    "overflow.done": "done",
}
FAILPOINTS = list(STATUS_AT_FAILPOINT)
MAX_TURNS_BEFORE_CRASH = 8  # the first job is due after the 3rd turn
TURNS_AFTER_RESTART = 3  # enough for the next overflow job


@pytest.fixture(scope="module")
def figure() -> Iterator[Figure]:
    figure = Figure("H. crashes: kill -9 at each summarizer step")
    yield figure
    print(figure.line())


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    """The chat model and the summarizer alike answer `ok: <the last user text>`."""
    with FakeOpenAIServer() as server:
        yield server


def chat_until_the_server_dies(
    server: TallyProcess, client: httpx.Client, session_id: str, turns: list[AnsweredTurn]
) -> None:
    """Send turns until the failpoint kills the server; record each turn that was answered."""
    for number in range(1, MAX_TURNS_BEFORE_CRASH + 1):
        text = f"turn {number} before the crash"
        try:
            turns.append(answered(text, send_turn(client, session_id, text)))
        except httpx.TransportError:
            break  # the process died during this turn
        if server.returncode is not None:
            break
    returncode = server.wait_for_exit(timeout_s=60)
    assert returncode == -signal.SIGKILL, (
        f"the failpoint never fired: after {number} turns the server "
        + ("still runs" if returncode is None else f"exited with {returncode}")
        + f"\n{server.log_tail()}"
    )


@pytest.mark.parametrize("failpoint", FAILPOINTS)
def test_kill_at_each_summarizer_step_then_restart_covers_every_range_once(
    failpoint: str, tmp_path: Path, upstream: FakeOpenAIServer, figure: Figure
) -> None:
    files = write_config(tmp_path, upstream_url=upstream.base_url)
    turns: list[AnsweredTurn] = []
    with figure.case() as case:
        with TallyProcess(files, failpoints=(failpoint,)) as server, server.client() as client:
            session_id = create_session(client)
            chat_until_the_server_dies(server, client, session_id, turns)

        at_crash = copy_database(files.database, tmp_path / "at-crash")
        (crashed_job,) = query(at_crash, "SELECT * FROM overflow_jobs")
        assert crashed_job["status"] == STATUS_AT_FAILPOINT[failpoint]

        with TallyProcess(files) as server, server.client() as client:
            wait_until_resumed(files.database)
            for number in range(1, TURNS_AFTER_RESTART + 1):
                text = f"turn {number} after the restart"
                turns.append(answered(text, send_turn(client, session_id, text)))
            wait_until_settled(files.database, session_id)

        lost = lost_messages(files.database, turns)
        case.items_lost = len(lost)
        assert not lost, f"answered messages lost: {lost}"
        check_invariants(files.database, files.memory, data_dir=files.data_dir)
        jobs = query(files.database, "SELECT id, status, memory_line FROM overflow_jobs")
        assert len(jobs) >= 2, "no overflow job ran after the restart"
        assert jobs[0]["id"] == crashed_job["id"] and jobs[0]["memory_line"] is not None
