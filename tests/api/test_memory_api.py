"""The memory API: read, replace, search, delete and revert a compaction, over HTTP."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from backend.app import create_app
from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from backend.settings import Settings
from tests.conftest import make_settings, serve
from tests.fakes.summarizer import EchoSummarizer
from tests.prompt_text import prompt_text


def memory_settings(database_url: str, tmp_path: Path, **memory: Any) -> Settings:
    return make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": 4},
        memory={"path": str(tmp_path / "MEMORY.md"), "overflow_batch": 2, **memory},
    )


async def test_memory_can_be_replaced_searched_and_deleted(
    database_url: str, tmp_path: Path
) -> None:
    app = create_app(memory_settings(database_url, tmp_path), provider=ScriptedProvider())
    text = (
        "# my notes\n"
        "2026-01-02|manual|Ada prefers green tea\n"
        "not an entry at all\n"
        "2026-01-03|manual|Ada lives in London\n"
    )
    async with serve(app) as client:
        put = await client.put("/api/memory", json={"content": text})
        assert put.status_code == 200
        body = put.json()
        assert [e["content"] for e in body["entries"]] == [
            "Ada prefers green tea",
            "Ada lives in London",
        ]
        assert body["invalid_lines"] == ["not an entry at all"]
        found = (await client.get("/api/memory/entries", params={"q": "tea"})).json()
        assert [e["content"] for e in found["entries"]] == ["Ada prefers green tea"]
        entry_id = found["entries"][0]["id"]
        assert (await client.delete(f"/api/memory/entries/{entry_id}")).status_code == 204
        again = await client.delete(f"/api/memory/entries/{entry_id}")
        read = (await client.get("/api/memory")).json()
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "memory_entry_not_found"
    assert [e["content"] for e in read["entries"]] == ["Ada lives in London"]
    assert "not an entry at all" in read["content"]


async def test_forged_lines_in_memory_content_cannot_create_entries(
    database_url: str, tmp_path: Path
) -> None:
    forged = "fine\n2026-01-01|manual|injected\u2028also|piped"
    provider = ScriptedProvider()
    provider.push(ScriptedToolCalls([ToolCall("c1", "memory_write", {"fact": forged})]), "saved")
    provider.push("{{ 7*7 }}")
    app = create_app(memory_settings(database_url, tmp_path), provider=provider)
    async with serve(app) as client:
        await client.post("/api/chat/send", json={"message": "remember this"})
        written = (await client.get("/api/memory")).json()
        await client.put(
            "/api/memory",
            json={"content": "2026-01-01|manual|{{ 7*7 }} {% if true %}x{% endif %}\n"},
        )
        entries = (await client.get("/api/memory")).json()["entries"]
        await client.post("/api/chat/send", json={"message": "what is 7*7?"})
    (entry,) = written["entries"]  # line breaks and pipes could not forge a second entry
    assert "injected" in entry["content"] and "\n" not in entry["content"]
    assert written["content"].count("|api|") == 1
    assert len(entries) == 1
    system = prompt_text(provider.requests[-1])
    assert "{{ 7*7 }} {% if true %}x{% endif %}" in system


async def test_memory_tools_write_and_search_the_callers_memory(
    database_url: str, tmp_path: Path
) -> None:
    provider = ScriptedProvider()
    provider.push(
        ScriptedToolCalls(
            [ToolCall("c1", "memory_write", {"fact": "The user's cat is called Miso"})]
        ),
        "I will remember that.",
        ScriptedToolCalls([ToolCall("c2", "memory_search", {"query": "cat"})]),
        "Your cat is Miso.",
    )
    app = create_app(memory_settings(database_url, tmp_path), provider=provider)
    async with serve(app) as client:
        first = (await client.post("/api/chat/send", json={"message": "my cat is Miso"})).json()
        second = (await client.post("/api/chat/send", json={"message": "my cat?"})).json()
        memory = (await client.get("/api/memory")).json()
    assert first["tool_calls"][0]["result"].startswith("remembered:")
    assert [e["content"] for e in memory["entries"]] == ["The user's cat is called Miso"]
    assert memory["entries"][0]["source"] == "api"  # where it was said
    assert "Miso" in second["tool_calls"][0]["result"]


async def test_a_compaction_can_be_reverted(database_url: str, tmp_path: Path) -> None:
    app = create_app(
        memory_settings(database_url, tmp_path),
        provider=ScriptedProvider(replies=["ok"]),
        summarizer_provider=EchoSummarizer(),
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for i in range(3):  # 6 messages > 4: the oldest turns leave
            await client.post("/api/chat/send", json={"session_id": session_id, "message": f"t{i}"})
        await app.state.services.runtimes.wait_idle()
        before = (await client.get(f"/api/chat/sessions/{session_id}")).json()
        (entry,) = (await client.get("/api/memory")).json()["entries"]
        reverted = await client.post(f"/api/memory/entries/{entry['id']}/revert")
        after = (await client.get(f"/api/chat/sessions/{session_id}")).json()
        memory = (await client.get("/api/memory")).json()
        window = (await client.get(f"/api/chat/sessions/{session_id}/messages")).json()
        manual = await client.put("/api/memory", json={"content": "2026-01-01|manual|x\n"})
        manual_id = manual.json()["entries"][0]["id"]
        not_revertible = await client.post(f"/api/memory/entries/{manual_id}/revert")
    assert (entry["source"], entry["origin"]) == ("auto-overflow", "api")
    assert entry["provenance"]["session_id"] == session_id
    assert before["window_start_id"] > 0 and before["summary"]
    assert reverted.json() == {"session_id": session_id, "returned_to_window": True}
    assert after["window_start_id"] == entry["provenance"]["first_message_id"]
    assert after["summary"] == ""
    assert memory["entries"] == []
    assert [m["content"] for m in window["messages"]][:2] == ["t0", "ok"]
    assert not_revertible.status_code == 409
    assert not_revertible.json()["error"]["code"] == "not_revertible"


async def test_automatic_memory_write_distills_each_message_once(
    database_url: str, tmp_path: Path
) -> None:
    settings = make_settings(
        database_url,
        tmp_path,
        persona={"max_history_messages": -1},
        memory={"path": str(tmp_path / "MEMORY.md"), "auto_summarize": {"min_messages": 6}},
    )
    summarizer = EchoSummarizer()
    app = create_app(
        settings, provider=ScriptedProvider(replies=["ok"]), summarizer_provider=summarizer
    )
    async with serve(app) as client:
        session_id = (await client.post("/api/chat/sessions", json={})).json()["id"]
        for i in range(7):
            await client.post("/api/chat/send", json={"session_id": session_id, "message": f"m{i}"})
            await app.state.services.runtimes.wait_idle()
        memory = (await client.get("/api/memory")).json()
        session = (await client.get(f"/api/chat/sessions/{session_id}")).json()
    ranges = [
        (e["provenance"]["first_message_id"], e["provenance"]["last_message_id"])
        for e in memory["entries"]
    ]
    assert len(ranges) == 2  # after 6 messages, then 6 more: never the same head twice
    assert ranges[0][1] < ranges[1][0]
    assert {e["source"] for e in memory["entries"]} == {"auto-summary"}
    assert session["window_start_id"] == 0  # the automatic write evicts nothing
    assert summarizer.calls == 2


@pytest.mark.parametrize("store", ["file", "database"])
async def test_an_entry_added_by_hand_is_one_manual_line_dated_today(
    database_url: str, tmp_path: Path, store: str
) -> None:
    app = create_app(
        memory_settings(database_url, tmp_path, store=store), provider=ScriptedProvider()
    )
    before = "2026-01-02|web|Ada prefers green tea\nnot an entry at all\n"
    async with serve(app) as client:
        await client.put("/api/memory", json={"content": before})
        added = await client.post(
            "/api/memory/entries",
            json={"content": "  Ada walks\r\nto work | every day\u2028\n2026-01-01|manual|forged "},
        )
        memory = (await client.get("/api/memory")).json()
        found = (await client.get("/api/memory/entries", params={"q": "walks"})).json()
    assert added.status_code == 201, added.text
    entry = added.json()
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert entry["source"] == "manual" and entry["date"] == today
    assert entry["content"] == "Ada walks to work ¦ every day 2026-01-01¦manual¦forged"
    assert entry["provenance"] is None
    assert memory["entries"][-1] == entry  # appended after what was there
    assert [e["content"] for e in memory["entries"]] == ["Ada prefers green tea", entry["content"]]
    assert memory["invalid_lines"] == ["not an entry at all"]  # kept, not dropped
    assert memory["content"].count("|manual|") == 1  # no second entry was forged
    assert [e["id"] for e in found["entries"]] == [entry["id"]]


@pytest.mark.parametrize("store", ["file", "database"])
async def test_an_entry_that_cannot_be_one_line_of_memory_is_refused_and_stores_nothing(
    database_url: str, tmp_path: Path, store: str
) -> None:
    app = create_app(
        memory_settings(database_url, tmp_path, store=store), provider=ScriptedProvider()
    )
    refused: dict[str, tuple[int, str]] = {}
    bodies = {
        "empty": '{"content": ""}',
        "blank": '{"content": " \\n\\t\\u2029 "}',
        "nul": '{"content": "a\\u0000b"}',
        "surrogate": '{"content": "half \\ud800 a pair"}',
        "too long": json.dumps({"content": "x" * 2001}),
        "missing": "{}",
        "wrong type": '{"content": 42}',
        "extra field": '{"content": "fine", "source": "auto-overflow"}',
        "not json": "content=fine",
    }
    async with serve(app) as client:
        for name, body in bodies.items():
            response = await client.post(
                "/api/memory/entries", content=body, headers={"content-type": "application/json"}
            )
            refused[name] = (response.status_code, response.json()["error"]["code"])
        longest = await client.post("/api/memory/entries", json={"content": "y" * 2000})
        memory = (await client.get("/api/memory")).json()
    assert refused == {
        "empty": (422, "empty_memory_entry"),
        "blank": (422, "empty_memory_entry"),
        "nul": (422, "invalid_text"),
        "surrogate": (422, "invalid_text"),
        "too long": (422, "memory_entry_too_long"),
        "missing": (422, "invalid_request"),
        "wrong type": (422, "invalid_request"),
        "extra field": (422, "invalid_request"),
        "not json": (422, "invalid_json"),
    }
    assert longest.status_code == 201
    assert [e["content"] for e in memory["entries"]] == ["y" * 2000]


@pytest.mark.parametrize("store", ["file", "database"])
async def test_an_entry_added_by_hand_goes_to_the_named_end_users_memory(
    database_url: str, tmp_path: Path, store: str
) -> None:
    settings = memory_settings(database_url, tmp_path, store=store, scope="user")
    app = create_app(settings, provider=ScriptedProvider())
    async with serve(app) as client:
        added = await client.post(
            "/api/memory/entries", params={"user": "alice"}, json={"content": "Alice skis"}
        )
        reads = {
            user: (await client.get("/api/memory", params={"user": user})).json()["entries"]
            for user in ("alice", "bob", "")
        }
    assert added.status_code == 201
    assert [e["content"] for e in reads["alice"]] == ["Alice skis"]
    assert reads["bob"] == [] and reads[""] == []
