"""MCP servers' tools in real turns: the real `mcp` SDK client in Tally speaks to a real MCP
server (tests/fakes/mcp_server.py) over stdio and over streamable HTTP on 127.0.0.1, and the
real OpenAI SDK speaks to the fake vendor.

A server is discovered at start, its tools are offered as `<server>__<tool>`, a call is stored
in `tool_conversations`, and a server that dies mid-conversation never fails a turn: its tools
answer a clear error until it is back, then work again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.composition.services import Services
from backend.storage.tables import tool_conversations
from backend.tools import mcp_connection, mcp_tools
from tests.conftest import make_settings, serve
from tests.fakes import Call, ToolCalls
from tests.fakes.mcp_harness import REPO_ROOT, free_port, mcp_http_server
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.process

WAIT_S = 120.0  # a condition's deadline on two busy cores; never a sleep


@pytest.fixture
def vendor() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_idle_pings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server killed by a test is noticed by the next call, not by a ping racing it."""
    monkeypatch.setattr(mcp_tools, "PING_EVERY_S", 3600.0)


def stdio_server(**extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server", "stdio"],
        "env": ["PYTHONPATH", "FAKE_MCP_SECRET", "FAKE_MCP_LOG"],
        **extra,
    }


def settings_with(
    database_url: str,
    tmp_path: Path,
    vendor: FakeOpenAIServer,
    tools: dict[str, Any],
    **sections: Any,
) -> Any:
    return make_settings(
        database_url,
        tmp_path,
        providers={"llm": {"kind": "openai_compatible", "base_url": vendor.base_url}},
        model={"provider": "llm", "name": "gpt-4o-mini"},
        tools={"enabled": ["now"], **tools},
        **sections,
    )


@pytest.fixture(autouse=True)
def _server_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    monkeypatch.setenv("FAKE_MCP_SECRET", "s3cret-from-env")
    monkeypatch.setenv("FAKE_MCP_LOG", str(tmp_path / "mcp.log"))


def offered(request_body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request_body.get("tools", [])}


def model_calls(vendor: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in vendor.requests if r.path.endswith("/chat/completions")]


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def stored_calls(services: Services) -> list[Any]:
    async with services.database.read() as conn:
        query = select(tool_conversations).order_by(tool_conversations.c.id)
        return list((await conn.execute(query)).all())


def connection(services: Services, name: str = "fake") -> mcp_connection.McpConnection:
    (found,) = [c for c in services.mcp.connections("default") if c.name == name]
    return found


async def send(client: Any, message: str, session_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    response = await client.post("/api/chat/send", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def stdio_children() -> list[int]:
    """This process's children running the fake server over stdio."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"tests.fakes.mcp_server" in command and b"stdio" in command:
            found.append(int(entry.name))
    return found


async def test_a_stdio_servers_tools_are_offered_and_a_call_is_stored(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    vendor.push(ToolCalls([Call("fake__echo", {"text": "hello MCP"}, id="call_1")]), "echoed")
    settings = settings_with(
        database_url, tmp_path, vendor, {"mcp_servers": {"fake": stdio_server()}}
    )
    app = create_app(settings)
    async with serve(app) as client:
        reply = await send(client, "please echo")
        rows = await stored_calls(app.state.services)

    assert reply["reply"] == "echoed"
    first, second = model_calls(vendor)
    expected = {"now", *(f"fake__{t}" for t in ("echo", "add", "big", "slow", "fail"))}
    assert expected <= offered(first)
    assert tool_messages(second) == ["hello MCP"]
    (row,) = rows
    assert (row.tool_name, row.result, row.is_error) == ("fake__echo", "hello MCP", False)
    assert row.arguments == {"text": "hello MCP"}
    assert row.message_id == reply["assistant_message_id"]


async def test_the_allow_list_and_the_environment_reach_the_server(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    vendor.push(ToolCalls([Call("fake__whoami", {}, id="call_1")]), "done")
    server = stdio_server(allow=["whoami", "ad*"])
    settings = settings_with(database_url, tmp_path, vendor, {"mcp_servers": {"fake": server}})
    async with serve(create_app(settings)) as client:
        await send(client, "who are you")

    first, second = model_calls(vendor)
    assert offered(first) == {"now", "fake__whoami", "fake__add"}
    assert tool_messages(second) == ["s3cret-from-env"]


async def test_a_killed_stdio_server_fails_no_turn_and_comes_back(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = settings_with(
        database_url, tmp_path, vendor, {"mcp_servers": {"fake": stdio_server()}}
    )
    app = create_app(settings)
    async with serve(app) as client:
        vendor.push(ToolCalls([Call("fake__echo", {"text": "one"}, id="c1")]), "first")
        session_id = (await send(client, "one"))["session_id"]
        (pid,) = stdio_children()
        os.kill(pid, signal.SIGKILL)

        vendor.push(ToolCalls([Call("fake__echo", {"text": "two"}, id="c2")]), "it is down")
        second = await send(client, "two", session_id)
        async with asyncio.timeout(WAIT_S):
            await connection(app.state.services).wait_connected()
        vendor.push(ToolCalls([Call("fake__echo", {"text": "three"}, id="c3")]), "back")
        third = await send(client, "three", session_id)
        rows = await stored_calls(app.state.services)

    assert (second["reply"], third["reply"]) == ("it is down", "back")
    results = [(r.result, r.is_error) for r in rows]
    assert results[0] == ("one", False) and results[2] == ("three", False)
    down, is_error = results[1]
    assert is_error and "MCP server 'fake'" in down and "reconnected" in down
    assert len(stdio_children()) == 0  # the server stops with the app


async def test_a_server_over_http_is_discovered_killed_and_restarted(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TOKEN", "tok-123")
    server_env = {"FAKE_MCP_AUTH": "Bearer tok-123"}
    async with mcp_http_server(env=server_env) as mcp:
        http = {"url": mcp.url, "headers": {"Authorization": "Bearer ${MCP_TOKEN}"}}
        settings = settings_with(database_url, tmp_path, vendor, {"mcp_servers": {"web": http}})
        app = create_app(settings)
        async with serve(app) as client:
            vendor.push(ToolCalls([Call("web__add", {"a": 2, "b": 3}, id="c1")]), "five")
            session_id = (await send(client, "add"))["session_id"]
            mcp.kill()
            vendor.push(ToolCalls([Call("web__add", {"a": 1, "b": 1}, id="c2")]), "down")
            down = await send(client, "add again", session_id)
            await mcp.restart()
            async with asyncio.timeout(WAIT_S):
                await connection(app.state.services, "web").wait_connected()
            vendor.push(ToolCalls([Call("web__header", {}, id="c3")]), "up")
            await send(client, "header", session_id)
            rows = await stored_calls(app.state.services)

    assert down["reply"] == "down"
    assert (rows[0].result, rows[0].is_error) == ("5", False)
    assert rows[1].is_error and "MCP server 'web'" in rows[1].result
    assert (rows[2].result, rows[2].is_error) == ("Bearer tok-123", False)
    assert "web__add" in offered(model_calls(vendor)[0])


async def test_a_server_down_at_start_is_picked_up_when_it_comes(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    http = {"url": url, "connect_timeout_s": 5}
    settings = settings_with(database_url, tmp_path, vendor, {"mcp_servers": {"web": http}})
    app = create_app(settings)
    async with serve(app) as client:
        vendor.push("no tools yet")
        first = await send(client, "hello")
        (down,) = (await client.get("/api/health")).json()["mcp_servers"]
        async with mcp_http_server(port=port):
            async with asyncio.timeout(WAIT_S):
                await connection(app.state.services, "web").wait_connected()
            (up,) = (await client.get("/api/health")).json()["mcp_servers"]
            vendor.push(ToolCalls([Call("web__echo", {"text": "hi"}, id="c1")]), "now with")
            second = await send(client, "again", first["session_id"])

    assert (first["reply"], second["reply"]) == ("no tools yet", "now with")
    assert (down["server"], down["connected"], down["tools"]) == ("web", False, 0)
    assert down["problem"]  # why, in the operator's view
    assert (up["connected"], up["problem"]) == (True, None) and up["tools"] >= 5
    before, after, _ = model_calls(vendor)
    assert offered(before) == {"now"}
    assert "web__echo" in offered(after)


async def test_a_call_past_the_timeout_errors_and_the_server_stays_usable(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    # 5 s: the echo after the slow call must fit in it too, on a busy machine.
    tools = {"timeout_s": 5, "mcp_servers": {"fake": stdio_server()}}
    settings = settings_with(database_url, tmp_path, vendor, tools)
    app = create_app(settings)
    async with serve(app) as client:
        vendor.push(
            ToolCalls([Call("fake__slow", {"seconds": 60}, id="c1")]),
            ToolCalls([Call("fake__echo", {"text": "still here"}, id="c2")]),
            "answered",
        )
        reply = await send(client, "slow please")
        rows = await stored_calls(app.state.services)

    assert reply["reply"] == "answered"
    assert rows[0].is_error and "did not finish within 5 s" in rows[0].result
    assert (rows[1].result, rows[1].is_error) == ("still here", False)


async def test_a_large_result_is_cut_for_the_model_and_kept_whole(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    tools = {"max_result_chars": 1000, "mcp_servers": {"fake": stdio_server()}}
    settings = settings_with(database_url, tmp_path, vendor, tools)
    app = create_app(settings)
    vendor.push(ToolCalls([Call("fake__big", {"size": 5000}, id="c1")]), "big")
    async with serve(app) as client:
        await send(client, "big")
        (row,) = await stored_calls(app.state.services)

    assert len(row.result) == 5000 and row.result.endswith("END")
    (sent,) = tool_messages(model_calls(vendor)[1])
    assert sent.startswith(row.result[:1000])
    assert "END" not in sent and "[cut: the result has 5,000 characters" in sent


async def test_a_tool_error_reaches_the_model_as_an_error(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = settings_with(
        database_url, tmp_path, vendor, {"mcp_servers": {"fake": stdio_server()}}
    )
    app = create_app(settings)
    vendor.push(ToolCalls([Call("fake__fail", {"message": "disk on fire"}, id="c1")]), "sorry")
    async with serve(app) as client:
        reply = await send(client, "fail")
        (row,) = await stored_calls(app.state.services)

    assert reply["reply"] == "sorry"
    assert row.is_error and "disk on fire" in row.result


async def test_only_an_administrator_sees_the_mcp_servers_in_health(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", "operator-key-123456")
    servers = {"mcp_servers": {"fake": stdio_server()}}
    settings = settings_with(database_url, tmp_path, vendor, servers, auth={"mode": "keys"})
    app = create_app(settings)
    async with serve(app) as client:
        async with asyncio.timeout(WAIT_S):
            await connection(app.state.services).wait_connected()
        public = (await client.get("/api/health")).json()
        operator = await client.get(
            "/api/health", headers={"Authorization": "Bearer operator-key-123456"}
        )
    assert public["mcp_servers"] == []
    (server,) = operator.json()["mcp_servers"]
    assert (server["tenant_id"], server["server"], server["connected"]) == ("default", "fake", True)


async def test_a_server_refusing_a_call_is_an_error_not_a_reconnect(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = settings_with(
        database_url, tmp_path, vendor, {"mcp_servers": {"fake": stdio_server()}}
    )
    app = create_app(settings)
    vendor.push(
        ToolCalls([Call("fake__refuse", {"message": "path must be absolute"}, id="c1")]),
        ToolCalls([Call("fake__echo", {"text": "same server"}, id="c2")]),
        "done",
    )
    async with serve(app) as client:
        async with asyncio.timeout(WAIT_S):
            await connection(app.state.services).wait_connected()
        before = stdio_children()
        await send(client, "refuse")
        after = stdio_children()
        rows = await stored_calls(app.state.services)

    refused, echoed = rows
    assert refused.is_error and refused.result == (
        "error: the MCP server 'fake' answered: path must be absolute"
    )
    assert (echoed.result, echoed.is_error) == ("same server", False)
    assert len(before) == 1 and after == before  # the same server process throughout


async def test_a_tenant_set_through_the_admin_api_narrows_a_shared_server(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator = {"Authorization": "Bearer operator-key-123456"}
    monkeypatch.setenv("TALLY_ADMIN_KEY", "operator-key-123456")
    servers = {"mcp_servers": {"fake": stdio_server()}}
    settings = settings_with(database_url, tmp_path, vendor, servers, auth={"mode": "keys"})
    narrowed = {"tools": {"mcp_allow": {"fake": ["echo", "ad*"]}}}
    async with serve(create_app(settings)) as client:
        created = await client.post(
            "/api/admin/tenants", headers=operator, json={"id": "acme", "settings": narrowed}
        )
        key = await client.post("/api/admin/tenants/acme/keys", headers=operator, json={})
        acme = {"Authorization": f"Bearer {key.json()['key']}"}
        vendor.push("acme's answer")
        answered = await client.post("/api/chat/send", headers=acme, json={"message": "hi"})

    assert created.status_code == 201, created.text
    assert answered.status_code == 200, answered.text
    (request,) = model_calls(vendor)
    assert offered(request) == {"now", "fake__echo", "fake__add"}  # the server offers 8
