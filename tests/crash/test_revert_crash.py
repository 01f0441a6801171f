"""`kill -9` while a reverted line's range is distilled again, then a restart: the range ends with
exactly one memory line, the new one, and every invariant holds (docs/operations.md, reliability
H)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.crash import (
    TallyProcess,
    create_session,
    query,
    send_turn,
    wait_until_resumed,
    wait_until_settled,
    write_config,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

TURNS = 6  # two overflow jobs at window 4, batch 2: the first is not the latest eviction


@pytest.mark.parametrize("failpoint", ["overflow.summarized", "overflow.memory_written"])
def test_a_crash_while_a_reverted_range_is_distilled_again_leaves_one_line(
    failpoint: str, tmp_path: Path
) -> None:
    with FakeOpenAIServer() as upstream:
        files = write_config(tmp_path, upstream_url=upstream.base_url)
        with TallyProcess(files) as server, server.client() as client:
            session_id = create_session(client)
            for number in range(TURNS):
                send_turn(client, session_id, f"turn {number}")
            wait_until_settled(files.database, session_id)
            oldest = client.get("/api/memory").json()["entries"][0]

        upstream.push("## Memory\n- distilled again\n\n## Summary\nAgain.")
        with TallyProcess(files, failpoints=(failpoint,)) as server, server.client() as client:
            reverted = client.post(f"/api/memory/entries/{oldest['id']}/revert")
            assert reverted.json()["returned_to_window"] is False, reverted.text
            assert server.wait_for_exit(timeout_s=60) == -signal.SIGKILL

        with TallyProcess(files) as server, server.client() as client:
            wait_until_resumed(files.database)
            entries = client.get("/api/memory").json()["entries"]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)
    same_range = [e for e in entries if e["provenance"] == oldest["provenance"]]
    assert [e["content"] for e in same_range] == ["distilled again"]
    assert len(query(files.database, "SELECT id FROM overflow_jobs")) >= 2
