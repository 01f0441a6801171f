"""Approval before a tool runs, over SSE: a call of a tool named in `tools.approval.required`
waits with a `tool.approval` event until `POST /api/chat/turns/{turn_id}/approvals` answers it.
Approved, it runs; denied, or unanswered in time, it never runs and the model is told why.

The tool under approval is the workspace's `write_file`, whose effect is a file on disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.composition.services import Services
from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from backend.storage.tables import tool_conversations
from tests.conftest import make_settings, serve
from tests.coordination.test_redis_coordination import two_processes
from tests.fakes import Call, ToolCalls
from tests.fakes.openai_server import FakeOpenAIServer
from tests.sse import read_events

WRITE = {"path": "notes.txt", "content": "approved words"}


@pytest.fixture
def vendor() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def approval_settings(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, timeout_s: float = 300
) -> Any:
    return make_settings(
        database_url,
        tmp_path,
        providers={"llm": {"kind": "openai_compatible", "base_url": vendor.base_url}},
        model={"provider": "llm", "name": "gpt-4o-mini"},
        tools={
            "enabled": ["now"],
            "workspace": {"enabled": True},
            "approval": {"required": ["write_*"], "timeout_s": timeout_s},
        },
    )


def written(settings: Any) -> Path:
    return Path(settings.data_dir) / "workspaces" / "default" / "notes.txt"


async def turn_answering(
    client: httpx.AsyncClient, approved: bool | None, message: str = "write it"
) -> list[tuple[str, dict[str, Any]]]:
    """A streamed turn; each `tool.approval` is answered `approved` (None: never answered)."""
    events: list[tuple[str, dict[str, Any]]] = []
    body = {"message": message, "stream": True}
    async with client.stream("POST", "/api/chat/send", json=body) as response:
        async for name, data in read_events(response):
            events.append((name, data))
            if name == "tool.approval" and approved is not None:
                decision = await client.post(
                    f"/api/chat/turns/{events[0][1]['turn_id']}/approvals",
                    json={"tool_call_id": data["tool_call_id"], "approved": approved},
                )
                assert decision.status_code == 200, decision.text
                assert decision.json() == {"tool_call_id": "c1", "approved": approved}
                again = await client.post(
                    f"/api/chat/turns/{events[0][1]['turn_id']}/approvals",
                    json={"tool_call_id": "c1", "approved": not approved},
                )
                assert again.status_code == 404  # the first decision stands
    return events


async def stored_calls(services: Services) -> list[Any]:
    async with services.database.read() as conn:
        return list((await conn.execute(select(tool_conversations))).all())


def told_the_model(vendor: FakeOpenAIServer) -> list[str]:
    bodies = [r.body for r in vendor.requests if r.path.endswith("/chat/completions")]
    return [m["content"] for m in bodies[-1]["messages"] if m["role"] == "tool"]


async def test_an_approved_call_runs(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    vendor.push(ToolCalls([Call("write_file", WRITE, id="c1")]), "saved")
    settings = approval_settings(database_url, tmp_path, vendor)
    async with serve(create_app(settings)) as client:
        events = await turn_answering(client, approved=True)

    names = [name for name, _ in events]
    assert names.index("tool.call") < names.index("tool.approval") < names.index("tool.result")
    asked = dict(events)["tool.approval"]
    assert asked == {
        "tool_call_id": "c1",
        "tool_name": "write_file",
        "arguments": WRITE,
        "timeout_s": 300.0,
    }
    assert dict(events)["tool.result"]["is_error"] is False
    assert names[-1] == "turn.completed"
    assert written(settings).read_text() == "approved words"


async def test_a_denied_call_never_runs_and_the_model_is_told(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    vendor.push(ToolCalls([Call("write_file", WRITE, id="c1")]), "not saved")
    settings = approval_settings(database_url, tmp_path, vendor)
    app = create_app(settings)
    async with serve(app) as client:
        events = await turn_answering(client, approved=False)
        (row,) = await stored_calls(app.state.services)

    result = dict(events)["tool.result"]
    assert result["is_error"] is True and "denied" in result["result"]
    assert events[-1][0] == "turn.completed" and events[-1][1]["reply"] == "not saved"
    assert not written(settings).exists()
    assert told_the_model(vendor) == ["error: the user denied this call; it did not run"]
    assert (row.tool_name, row.is_error, row.duration_ms) == ("write_file", True, 0)


async def test_an_unanswered_call_times_out_as_a_denial(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    vendor.push(ToolCalls([Call("write_file", WRITE, id="c1")]), "timed out")
    settings = approval_settings(database_url, tmp_path, vendor, timeout_s=0.5)
    async with serve(create_app(settings)) as client:
        events = await turn_answering(client, approved=None)
        late = await client.post(
            f"/api/chat/turns/{events[0][1]['turn_id']}/approvals",
            json={"tool_call_id": "c1", "approved": True},
        )

    assert not written(settings).exists()
    assert told_the_model(vendor) == [
        "error: no one approved this call within 0.5 s; it did not run"
    ]
    assert late.status_code == 404 and late.json()["error"]["code"] == "approval_not_found"


async def test_tools_not_named_run_without_asking(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    vendor.push(ToolCalls([Call("list_files", {}, id="c1")]), "listed")
    settings = approval_settings(database_url, tmp_path, vendor)
    async with serve(create_app(settings)) as client:
        events = await turn_answering(client, approved=None)
    assert "tool.approval" not in dict(events)
    assert dict(events)["tool.result"]["is_error"] is False


async def test_a_decision_for_no_waiting_call_is_a_404_and_a_bad_one_a_422(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = approval_settings(database_url, tmp_path, vendor)
    async with serve(create_app(settings)) as client:
        unknown = await client.post(
            "/api/chat/turns/turn_nope/approvals", json={"tool_call_id": "c1", "approved": True}
        )
        bad = await client.post(
            "/api/chat/turns/turn_nope/approvals", json={"tool_call_id": "", "approved": "yes!"}
        )
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "approval_not_found"
    assert bad.status_code == 422


NOT_A_YES = ["yes", "true", 1, "1", {"value": True}, [True], None]


async def test_only_true_approves_a_waiting_call(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    """`"approved": "yes"` once approved a call (a `write_file` ran): only JSON `true` means
    yes now; anything else is a 422 that decides nothing, and the call still waits."""
    vendor.push(ToolCalls([Call("write_file", WRITE, id="c1")]), "not written")
    settings = approval_settings(database_url, tmp_path, vendor)
    refused: list[int] = []
    async with serve(create_app(settings)) as client:
        events: list[tuple[str, dict[str, Any]]] = []
        body = {"message": "write it", "stream": True}
        async with client.stream("POST", "/api/chat/send", json=body) as response:
            async for name, data in read_events(response):
                events.append((name, data))
                if name != "tool.approval":
                    continue
                url = f"/api/chat/turns/{events[0][1]['turn_id']}/approvals"
                for value in NOT_A_YES:
                    answer = await client.post(url, json={"tool_call_id": "c1", "approved": value})
                    refused.append(answer.status_code)
                as_number = await client.post(url, json={"tool_call_id": 1, "approved": False})
                refused.append(as_number.status_code)
                no = await client.post(url, json={"tool_call_id": "c1", "approved": False})
                assert no.status_code == 200, no.text

    assert refused == [422] * (len(NOT_A_YES) + 1)
    assert dict(events)["tool.result"]["is_error"] is True
    assert not written(settings).exists()


async def test_a_call_waiting_on_one_process_is_approved_through_another(
    postgres: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    owner = ScriptedProvider()
    owner.push(
        ScriptedToolCalls([ToolCall("c1", "write_file", dict(WRITE))]),
        "saved elsewhere",
    )
    coordination = {"redis_url": redis_url, "key_prefix": redis_prefix}
    tools = {
        "enabled": ["now"],
        "workspace": {"enabled": True},
        "approval": {"required": ["write_file"]},
    }
    async with two_processes(
        postgres, tmp_path, coordination, (owner, ScriptedProvider()), tools=tools
    ) as (a, b):
        events: list[tuple[str, dict[str, Any]]] = []
        body = {"message": "write", "stream": True}
        async with a.stream("POST", "/api/chat/send", json=body) as response:
            async for name, data in read_events(response):
                events.append((name, data))
                if name == "tool.approval":
                    url = f"/api/chat/turns/{events[0][1]['turn_id']}/approvals"
                    wrong = await b.post(url, json={"tool_call_id": "c9", "approved": True})
                    decision = await b.post(url, json={"tool_call_id": "c1", "approved": True})
                    again = await b.post(url, json={"tool_call_id": "c1", "approved": False})
    assert decision.status_code == 200, decision.text
    assert wrong.status_code == again.status_code == 404  # one decision wins, once
    assert dict(events)["tool.result"]["is_error"] is False
    assert events[-1][1]["reply"] == "saved elsewhere"
    assert (tmp_path / "data" / "workspaces" / "default" / "notes.txt").exists()


async def test_a_client_that_cannot_answer_has_the_call_denied_at_once(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    """A JSON (not streamed) turn never sees `tool.approval`: waiting would only delay it."""
    vendor.push(ToolCalls([Call("write_file", WRITE, id="c1")]), "needs approval")
    settings = approval_settings(database_url, tmp_path, vendor)
    async with serve(create_app(settings)) as client:
        reply = await client.post("/api/chat/send", json={"message": "write it"})
    assert reply.status_code == 200 and reply.json()["reply"] == "needs approval"
    (call,) = reply.json()["tool_calls"]
    assert call["is_error"] is True and "cannot be given" in call["result"]
    assert not written(settings).exists()


async def test_a_turn_cancelled_while_it_waits_never_runs_the_call(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    vendor.push(ToolCalls([Call("write_file", WRITE, id="c1")]), "never said")
    settings = approval_settings(database_url, tmp_path, vendor)
    events: list[tuple[str, dict[str, Any]]] = []
    async with serve(create_app(settings)) as client:
        body = {"message": "write it", "stream": True}
        async with client.stream("POST", "/api/chat/send", json=body) as response:
            async for name, data in read_events(response):
                events.append((name, data))
                if name == "tool.approval":
                    session_id = events[0][1]["session_id"]
                    await client.post(f"/api/chat/sessions/{session_id}/cancel")
        late = await client.post(
            f"/api/chat/turns/{events[0][1]['turn_id']}/approvals",
            json={"tool_call_id": "c1", "approved": True},
        )
    assert events[-1][0] == "error" and events[-1][1]["code"] == "cancelled"
    assert late.status_code == 404
    assert not written(settings).exists()
