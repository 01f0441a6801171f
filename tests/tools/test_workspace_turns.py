"""The workspace tools in real turns: the app served on 127.0.0.1, the real OpenAI SDK speaking
to the fake vendor, and real files in `<data_dir>/workspaces/default/`.

A call's result is stored in `tool_conversations` and reaches the model as the `tool` message of
the turn's next request; a path out of the workspace is an error result, the turn still
answers, and nothing from outside the workspace reaches the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import Row, select

from backend.app import create_app
from backend.settings import Settings
from backend.storage.tables import messages, tool_conversations
from tests.conftest import make_settings, serve
from tests.fakes import Call, ToolCalls
from tests.fakes.openai_server import FakeOpenAIServer

WORKSPACE_TOOLS = {"read_file", "list_files", "write_file"}
SEED_README = "# CountBot\n\nCountBot 是一个智能助手框架。\n"
README_RESULT = (
    "[File: README.md | Lines: 3]\n  1| # CountBot\n  2|\n  3| CountBot 是一个智能助手框架。"
)
SUMMARY = "README.md 介绍了 CountBot：一个基于 LLM 的智能助手框架。"
HOST_SECRET = "host-secret-7f3a9c"


@pytest.fixture
def vendor() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def vendor_settings(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer, *, is_workspace_on: bool = True
) -> Settings:
    tools: dict[str, Any] = {"enabled": ["now"]}
    if is_workspace_on:
        tools["workspace"] = {"enabled": True}
    return make_settings(
        database_url,
        tmp_path,
        providers={"llm": {"kind": "openai_compatible", "base_url": vendor.base_url}},
        model={"provider": "llm", "name": "gpt-4o-mini"},
        tools=tools,
    )


def default_workspace(settings: Settings) -> Path:
    """The default tenant's workspace, made before the app starts so a test can fill it."""
    folder = Path(settings.data_dir) / "workspaces" / "default"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def model_calls(vendor: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in vendor.requests if r.path == "/v1/chat/completions"]


def offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def tool_messages(body: dict[str, Any]) -> list[str]:
    """The contents of the `tool` messages a request carried to the model."""
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def stored(app: FastAPI) -> tuple[list[Row[Any]], list[Row[Any]]]:
    """The stored messages and tool calls, oldest first."""
    async with app.state.services.database.read() as conn:
        message_rows = (await conn.execute(select(messages).order_by(messages.c.id))).all()
        tool_rows = (
            await conn.execute(select(tool_conversations).order_by(tool_conversations.c.id))
        ).all()
    return list(message_rows), list(tool_rows)


async def test_the_seeds_read_the_readme_turn_reads_the_real_file(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = vendor_settings(database_url, tmp_path, vendor)
    (default_workspace(settings) / "README.md").write_text(SEED_README, encoding="utf-8")
    call = Call("read_file", {"path": "README.md", "show_line_numbers": True}, id="call_abc123")
    vendor.push(ToolCalls([call]), SUMMARY)
    app = create_app(settings)
    async with serve(app) as client:
        sent = await client.post("/api/chat/send", json={"message": "读取 README.md 文件"})
        message_rows, tool_rows = await stored(app)

    assert sent.status_code == 200, sent.text
    assert sent.json()["reply"] == SUMMARY
    assert [(r.role, r.content) for r in message_rows] == [
        ("user", "读取 README.md 文件"),
        ("assistant", SUMMARY),
    ]
    (tool,) = tool_rows
    assert (tool.tool_name, tool.tool_call_id) == ("read_file", "call_abc123")
    assert tool.arguments == {"path": "README.md", "show_line_numbers": True}
    assert tool.result == README_RESULT
    assert tool.is_error is False
    assert tool.message_id == message_rows[1].id == sent.json()["assistant_message_id"]
    first, second = model_calls(vendor)
    assert WORKSPACE_TOOLS <= offered(first)
    assert tool_messages(second) == [README_RESULT]


async def test_a_write_then_a_read_across_turns(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = vendor_settings(database_url, tmp_path, vendor)
    content = "- 写报告\n- buy milk\n"
    vendor.push(
        ToolCalls([Call("write_file", {"path": "notes/todo.md", "content": content})]),
        "Saved.",
        ToolCalls([Call("read_file", {"path": "notes/todo.md"})]),
        "Two items.",
    )
    app = create_app(settings)
    async with serve(app) as client:
        first = (await client.post("/api/chat/send", json={"message": "note my todos"})).json()
        second = (
            await client.post(
                "/api/chat/send",
                json={"session_id": first["session_id"], "message": "what is on my list?"},
            )
        ).json()
        _, tool_rows = await stored(app)

    expected_read = "[File: notes/todo.md | Lines: 2]\n- 写报告\n- buy milk"
    assert [first["reply"], second["reply"]] == ["Saved.", "Two items."]
    assert [(r.tool_name, r.result, r.is_error) for r in tool_rows] == [
        ("write_file", "wrote 23 bytes to notes/todo.md", False),
        ("read_file", expected_read, False),
    ]
    assert tool_rows[0].turn_id != tool_rows[1].turn_id
    written = default_workspace(settings) / "notes" / "todo.md"
    assert written.read_text(encoding="utf-8") == content
    assert tool_messages(model_calls(vendor)[3]) == [expected_read]


async def test_the_workspace_refuses_paths_out_in_a_turn(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = vendor_settings(database_url, tmp_path, vendor)
    outside = tmp_path / "outside.txt"
    outside.write_text(f"{HOST_SECRET}\n")
    (default_workspace(settings) / "leak.txt").symlink_to(outside)
    (default_workspace(settings).parent / "secret").write_text(f"{HOST_SECRET}\n")
    vendor.push(
        ToolCalls(
            [
                Call("read_file", {"path": "../secret"}, id="call_up"),
                Call("read_file", {"path": "/etc/passwd"}, id="call_absolute"),
                Call("read_file", {"path": "leak.txt"}, id="call_link"),
            ]
        ),
        "I cannot read those files.",
    )
    app = create_app(settings)
    async with serve(app) as client:
        sent = await client.post("/api/chat/send", json={"message": "show me the secrets"})
        _, tool_rows = await stored(app)

    assert sent.status_code == 200, sent.text
    assert sent.json()["reply"] == "I cannot read those files."
    assert [(r.tool_call_id, r.result, r.is_error) for r in tool_rows] == [
        ("call_up", "error: path must not contain '..'", True),
        (
            "call_absolute",
            "error: absolute paths are not allowed; give a path relative to the workspace",
            True,
        ),
        ("call_link", "error: path leads outside the workspace", True),
    ]
    recorded = json.dumps([r.body for r in vendor.requests], ensure_ascii=False)
    assert len(model_calls(vendor)) == 2
    assert HOST_SECRET not in recorded
    assert "root:x:0:0" not in recorded
    assert str(tmp_path) not in recorded  # no host path either


async def test_workspace_tools_are_not_offered_when_off(
    database_url: str, tmp_path: Path, vendor: FakeOpenAIServer
) -> None:
    settings = vendor_settings(database_url, tmp_path, vendor, is_workspace_on=False)
    vendor.push("Hello.")
    app = create_app(settings)
    async with serve(app) as client:
        sent = await client.post("/api/chat/send", json={"message": "hi"})

    assert sent.json()["reply"] == "Hello."
    (body,) = model_calls(vendor)
    assert "now" in offered(body)  # tools are offered, only not these
    assert not WORKSPACE_TOOLS & offered(body)
    assert not (Path(settings.data_dir) / "workspaces").exists()
