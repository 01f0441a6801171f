"""The turn journal in Redis (what a reconnect on another process reads) copies a turn whose
text no UTF-8 encoder writes as it is (a lone surrogate in the reply and the tool call's
arguments, a NUL) to its terminal event (issue 30): the Redis copy was the first to break."""

from __future__ import annotations

from pathlib import Path

from tests.chat.test_model_side_text import VALUES, app_for, probe, turn, vendor
from tests.conftest import serve
from tests.fakes import Call, ToolCalls
from tests.fakes.openai_server import FakeOpenAIServer

__all__ = ["vendor"]  # the fake vendor fixture, shared with test_model_side_text.py


async def test_the_turn_journal_in_redis_keeps_a_turn_with_odd_text_to_its_end(
    postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    arguments = {"timezone": VALUES["lone_surrogate"], "x": VALUES["nul"]}
    vendor.push(ToolCalls([Call("now", arguments, id="call_1")]), "done \ud800")
    coordination = {"redis_url": redis_url, "key_prefix": redis_prefix}
    app = app_for(postgres, tmp_path, vendor, coordination=coordination)
    async with serve(app) as client:
        answered = await turn(client, {"message": "odd"}, stream=True)
        journal = app.state.services.coordinator.journal
        turn_id = answered["events"][0][1]["turn_id"]
        entries = await journal.read("default", turn_id, after=0, wait_s=0)

    assert entries is not None
    probe(bool(entries) and entries[-1].is_final)
    assert [e.seq for e in entries] == list(range(1, len(answered["events"]) + 1))
    assert entries[-1].is_final and "event: turn.completed" in entries[-1].chunk
