"""Text from the model side is stored, never a 500 (issue 30; docs/operations.md, reliability C, G).

A family of probes sends what a model, a tool or an MCP server may hand over — a NUL, a lone
surrogate, 300,000 characters, brackets 5,000 deep, arguments nested past any sane depth or
holding numbers JSON cannot carry — through a full turn (the real `openai` SDK against the fake
vendor, over HTTP, JSON and SSE) on SQLite and PostgreSQL. Each turn completes, the stream ends
with its terminal event, the same text is stored on both backends (each NUL and lone surrogate
as U+FFFD: `domain/text.py`), every read route answers 200 afterwards, and the next turn works.
Rows written before the normalisation existed never fail a read either.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, update

from backend.app import create_app
from backend.domain.text import CUT_JSON, MAX_JSON_DEPTH, storable_json, storable_text
from backend.storage.tables import messages, sessions, tool_conversations
from backend.tools.base import ToolContext
from tests.conftest import make_settings, serve
from tests.fakes import Call, Text, ToolCalls
from tests.fakes.mcp_harness import REPO_ROOT
from tests.fakes.mcp_server import ODD_RESULTS
from tests.fakes.openai_server import FakeOpenAIServer
from tests.sse import read_events

VALUES = {
    "nul": "before\x00after",
    "lone_surrogate": "before\ud800after",
    "overlong": "x" * 300_000,
    "nested": "[" * 5_000 + "]" * 5_000,
}
REPLACED = "before\ufffdafter"
FIGURE = {"tried": 0, "survived": 0, "lost": 0}


@pytest.fixture(scope="module", autouse=True)
def figure() -> Iterator[None]:
    yield
    print(
        f"\nmodel-side text: {FIGURE['tried']} probes tried, {FIGURE['survived']} survived, "
        f"{FIGURE['lost']} lost"
    )


@pytest.fixture
def vendor() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


class OddTool:
    """A tool whose result is whatever the test asks for: text no careful tool would return."""

    name = "odd_result"
    description = "Returns odd text."
    parameters: dict[str, object] = {"type": "object", "properties": {"kind": {"type": "string"}}}

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        return VALUES[str(arguments["kind"])]


def app_for(database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, **sections: Any) -> Any:
    settings = settings_for(database_url, tmp_path, vendor, **sections)
    return create_app(settings, extra_tools=[OddTool()])


def settings_for(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, **sections: Any
) -> Any:
    tools = {"enabled": ["now", "memory_write", "memory_search", "odd_result"]}
    return make_settings(
        database_url,
        tmp_path,
        providers={"llm": {"kind": "openai_compatible", "base_url": vendor.base_url}},
        model={"provider": "llm", "name": "gpt-4o-mini"},
        tools=sections.pop("tools", tools),
        **sections,
    )


async def turn(client: httpx.AsyncClient, body: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """One turn; what it answered: the terminal event's data (or the JSON body) and, streamed,
    the events before it."""
    if not stream:
        response = await client.post("/api/chat/send", json=body)
        assert response.status_code == 200, response.text
        return {"end": response.json(), "events": []}
    async with client.stream("POST", "/api/chat/send", json={**body, "stream": True}) as r:
        assert r.status_code == 200
        events = [event async for event in read_events(r)]
    names = [name for name, _ in events]
    assert names.count("turn.completed") + names.count("error") == 1, names
    assert names[-1] == "turn.completed", events[-1]
    return {"end": events[-1][1], "events": events}


async def read_everything(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """Every read route that shows what a turn stored; each must answer 200."""
    paths = {
        "session": f"/api/chat/sessions/{session_id}",
        "messages": f"/api/chat/sessions/{session_id}/messages?include_archived=true",
        "tool_conversations": f"/api/chat/sessions/{session_id}/tool-conversations",
        "sessions": "/api/chat/sessions",
        "memory": "/api/memory",
        "entries": "/api/memory/entries",
        "usage": "/api/usage",
        "health": "/api/health",
    }
    found = {}
    for name, path in paths.items():
        response = await client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        found[name] = response.json()
    return found


def probe(outcome: bool) -> None:
    FIGURE["tried"] += 1
    FIGURE["survived"] += outcome
    FIGURE["lost"] += not outcome


async def the_next_turn_works(
    app: Any, client: httpx.AsyncClient, vendor: FakeOpenAIServer, session_id: str
) -> None:
    # A summary the first turn started (an overlong reply overflows the window) calls the same
    # vendor: it must not take the reply scripted for this turn.
    await app.state.services.runtimes.wait_idle()
    vendor.push("still here")
    after = await turn(client, {"session_id": session_id, "message": "again"}, stream=False)
    assert after["end"]["reply"] == "still here"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("kind", list(VALUES))
async def test_a_reply_of_odd_text_is_stored_the_same_on_every_backend(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, kind: str, stream: bool
) -> None:
    said = f"reply {VALUES[kind]}"
    vendor.push(Text(said))
    app = app_for(database_url, tmp_path, vendor)
    async with serve(app) as client:
        answered = await turn(client, {"message": "say it"}, stream=stream)
        session_id = answered["end"]["session_id"]
        shown = await read_everything(client, session_id)
        await the_next_turn_works(app, client, vendor, session_id)

    expected = storable_text(said)
    deltas = "".join(d["text"] for name, d in answered["events"] if name == "text.delta")
    replies = [m["content"] for m in shown["messages"]["messages"] if m["role"] == "assistant"]
    probe(replies == [expected])
    assert answered["end"]["reply"] == expected
    assert deltas == (expected if stream else "")
    assert replies == [expected]


@pytest.mark.parametrize("kind", list(VALUES))
async def test_reasoning_of_odd_text_is_stored_with_its_reply(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, kind: str
) -> None:
    vendor.push(Text("the answer", thinking=f"thinking {VALUES[kind]}"))
    app = app_for(database_url, tmp_path, vendor)
    async with serve(app) as client:
        answered = await turn(client, {"message": "think"}, stream=True)
        shown = await read_everything(client, answered["end"]["session_id"])

    expected = storable_text(f"thinking {VALUES[kind]}")
    streamed = "".join(d["text"] for name, d in answered["events"] if name == "thinking.delta")
    (reply,) = [m for m in shown["messages"]["messages"] if m["role"] == "assistant"]
    probe(reply["thinking"] == expected)
    assert streamed == expected
    assert (reply["content"], reply["thinking"]) == ("the answer", expected)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("kind", list(VALUES))
async def test_tool_arguments_of_odd_text_are_stored_and_shown(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, kind: str, stream: bool
) -> None:
    arguments = {"timezone": VALUES[kind], f"key {VALUES[kind][:20]}": [VALUES[kind]]}
    vendor.push(ToolCalls([Call("now", arguments, id="call_1")]), "done")
    app = app_for(database_url, tmp_path, vendor)
    async with serve(app) as client:
        answered = await turn(client, {"message": "what time"}, stream=stream)
        session_id = answered["end"]["session_id"]
        shown = await read_everything(client, session_id)
        await the_next_turn_works(app, client, vendor, session_id)

    expected = storable_json(arguments)
    (stored,) = shown["tool_conversations"]["tool_conversations"]
    probe(stored["arguments"] == expected)
    assert stored["arguments"] == expected
    assert answered["end"]["reply"] == "done"
    if stream:
        (call,) = [d for name, d in answered["events"] if name == "tool.call"]
        assert call["arguments"] == expected
    else:
        assert answered["end"]["tool_calls"][0]["arguments"] == expected


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


ARGUMENTS = {  # raw JSON as the model sent it, and what a row then holds
    "nested_past_the_cut": nested_object(MAX_JSON_DEPTH + 40),
    "nested_past_recursion": nested_object(5_000),
    "number_too_large_for_a_float": '{"n": 1e400}',
    "integer_of_5000_digits": '{"n": ' + "7" * 5_000 + "}",
    "nan": '{"n": NaN}',
}


@pytest.mark.parametrize("case", list(ARGUMENTS))
async def test_arguments_nested_too_deep_or_unreadable_are_stored_or_refused_to_the_model(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, case: str
) -> None:
    vendor.push(ToolCalls([Call("now", ARGUMENTS[case], id="call_1")]), "done")
    app = app_for(database_url, tmp_path, vendor)
    async with serve(app) as client:
        answered = await turn(client, {"message": "odd"}, stream=True)
        shown = await read_everything(client, answered["end"]["session_id"])

    (stored,) = shown["tool_conversations"]["tool_conversations"]
    probe(answered["end"]["reply"] == "done")
    assert answered["end"]["reply"] == "done"
    if case == "nested_past_the_cut":
        cut = json.dumps(stored["arguments"])
        assert cut.count('{"a": ') == MAX_JSON_DEPTH and json.dumps(CUT_JSON) in cut
    elif case in ("number_too_large_for_a_float", "nan"):
        assert stored["arguments"] == {"n": "inf" if case != "nan" else "nan"}
    else:  # the model reads that its arguments were no JSON object
        assert stored["is_error"] and "not a JSON object" in stored["result"]


async def test_a_tool_call_id_and_name_longer_than_their_columns_are_stored_cut(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    name, call_id = "n" * 1_000 + "\x00", "c" * 1_000
    vendor.push(ToolCalls([Call(name, {}, id=call_id)]), "done")
    app = app_for(database_url, tmp_path, vendor)
    async with serve(app) as client:
        answered = await turn(client, {"message": "odd"}, stream=False)
        shown = await read_everything(client, answered["end"]["session_id"])

    (stored,) = shown["tool_conversations"]["tool_conversations"]
    probe(stored["tool_call_id"] == call_id[:200])
    assert (stored["tool_call_id"], stored["tool_name"]) == (call_id[:200], "n" * 200)
    assert stored["is_error"] and "no tool named" in stored["result"]
    assert answered["end"]["tool_calls"][0]["tool_call_id"] == call_id  # the turn's own id


@pytest.mark.parametrize("kind", list(VALUES))
async def test_a_tools_result_of_odd_text_is_stored_and_given_to_the_model(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, kind: str
) -> None:
    vendor.push(ToolCalls([Call("odd_result", {"kind": kind}, id="call_1")]), "read it")
    app = app_for(database_url, tmp_path, vendor)
    async with serve(app) as client:
        answered = await turn(client, {"message": "odd"}, stream=True)
        shown = await read_everything(client, answered["end"]["session_id"])

    expected = storable_text(VALUES[kind])
    (stored,) = shown["tool_conversations"]["tool_conversations"]
    (result,) = [d for name, d in answered["events"] if name == "tool.result"]
    sent_back = [m["content"] for m in vendor.requests[-1].body["messages"] if m["role"] == "tool"]
    probe(stored["result"] == expected)
    assert (stored["result"], stored["is_error"]) == (expected, False)
    assert result["result"] == expected
    assert sent_back == [expected[:20_000] + (sent_back[0][20_000:] if kind == "overlong" else "")]


@pytest.mark.process
@pytest.mark.parametrize("kind", list(ODD_RESULTS))
async def test_an_mcp_servers_result_of_odd_text_is_stored(
    database_url: str,
    tmp_path: Path,
    vendor: FakeOpenAIServer,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    server = {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server", "stdio"]}
    server["env"] = ["PYTHONPATH"]
    tools = {"enabled": ["now"], "mcp_servers": {"fake": server}}
    vendor.push(ToolCalls([Call("fake__odd", {"kind": kind}, id="call_1")]), "read it")
    app = create_app(settings_for(database_url, tmp_path, vendor, tools=tools))
    async with serve(app) as client:
        answered = await turn(client, {"message": "odd"}, stream=False)
        shown = await read_everything(client, answered["end"]["session_id"])

    (stored,) = shown["tool_conversations"]["tool_conversations"]
    expected = storable_text(ODD_RESULTS[kind])
    probe(stored["result"] == expected)
    assert (stored["result"], stored["is_error"]) == (expected, False)
    assert answered["end"]["reply"] == "read it"


FACT_STORES = {
    "file": {"memory": {"store": "file"}},
    "database": {"memory": {"store": "database"}},
    "proposed": {"memory": {"scope": "user", "confirm_writes": True}},
}


@pytest.mark.parametrize("store", list(FACT_STORES))
@pytest.mark.parametrize("kind", ["nul", "lone_surrogate"])
async def test_a_fact_of_odd_text_the_model_remembers_is_kept(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, kind: str, store: str
) -> None:
    sections = FACT_STORES[store]
    sections["memory"] = {**sections["memory"], "path": str(tmp_path / "MEMORY.md")}
    fact = f"the fact is {VALUES[kind]}"
    vendor.push(ToolCalls([Call("memory_write", {"fact": fact}, id="call_1")]), "noted")
    app = app_for(database_url, tmp_path, vendor, **sections)
    body = {"message": "remember", "user": "ada"} if store == "proposed" else {"message": "x"}
    async with serve(app) as client:
        answered = await turn(client, body, stream=True)
        shown = await read_everything(client, answered["end"]["session_id"])
        proposals = await client.get("/api/memory/proposals", params={"user": "ada"})

    (stored,) = shown["tool_conversations"]["tool_conversations"]
    if store == "proposed":
        assert proposals.status_code == 200, proposals.text
        kept = [p["content"] for p in proposals.json()["proposals"]]
    else:
        kept = [e["content"] for e in shown["memory"]["entries"]]
    probe(not stored["is_error"] and len(kept) == 1)
    assert not stored["is_error"], stored["result"]
    assert kept == ["the fact is before\ufffdafter"]


async def test_rows_stored_before_the_normalisation_never_fail_a_read(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    """Old rows hold what the JSON columns took as escapes (`\\ud800`, `\\u0000`) on both
    backends (a text column never held a lone surrogate), and SQLite's text columns held NULs:
    the reads and the next turn still work."""
    vendor.push("first")
    app = app_for(database_url, tmp_path, vendor)
    is_sqlite = database_url.startswith("sqlite")
    raw_text = "old\x00text" if is_sqlite else "old text"  # PostgreSQL never stored a NUL
    async with serve(app) as client:
        first = await turn(client, {"message": "hello"}, stream=False)
        session_id = first["end"]["session_id"]
        async with app.state.services.database.write() as conn:
            await conn.execute(
                insert(tool_conversations).values(
                    tenant_id="default",
                    session_id=session_id,
                    turn_id=first["end"]["turn_id"],
                    tool_call_id="old",
                    tool_name="now",
                    arguments={"k\ud800": ["\ud800", "\x00"]},
                    result=raw_text,
                    is_error=False,
                    duration_ms=1,
                    user_message=raw_text,
                    timestamp=datetime.now(UTC),
                )
            )
            await conn.execute(
                update(messages)
                .where(messages.c.id == first["end"]["assistant_message_id"])
                .values(content=raw_text, thinking=raw_text)
            )
            await conn.execute(
                update(sessions).where(sessions.c.id == session_id).values(summary=raw_text)
            )
        shown = await read_everything(client, session_id)
        await the_next_turn_works(app, client, vendor, session_id)

    (old,) = shown["tool_conversations"]["tool_conversations"]
    probe(old["arguments"] == {"k\ufffd": ["\ufffd", "\ufffd"]})
    assert old["arguments"] == {"k\ufffd": ["\ufffd", "\ufffd"]}
    assert (old["result"], old["user_message"]) == (storable_text(raw_text),) * 2
    reply = shown["messages"]["messages"][1]
    assert reply["content"] == storable_text(raw_text) == reply["thinking"]
    assert shown["session"]["summary"] == storable_text(raw_text)
