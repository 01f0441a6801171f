"""The seed's three turns ("hello", a tool call, "thanks") through the real SDKs.

Checks the stored state exactly: `messages` holds only user and final assistant rows, the tool
call lives in `tool_conversations` linked to its reply, and the third request carries the first
two turns' texts and no tool messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.storage.tables import messages, tool_conversations
from backend.tools.base import ToolContext
from tests.conftest import make_settings, serve
from tests.fakes import Call, FakeServer, ToolCalls
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer

README_TEXT = (
    "[File: README.md | Lines: 3]\n  1| # CountBot\n  2|\n  3| CountBot 是一个智能助手框架。"
)
GREETING = "你好！很高兴见到你！有什么我可以帮助你的吗？"
SUMMARY = "README.md 介绍了 CountBot：一个基于 LLM 的智能助手框架。"
THANKS = "不客气！"


class ReadFileTool:
    """A stand-in for the seed's `read_file`: one known file, nothing from disk."""

    name = "read_file"
    description = "Read a text file of the workspace."
    parameters: dict[str, object] = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "show_line_numbers": {"type": "boolean"}},
        "required": ["path"],
    }

    async def run(self, arguments: dict[str, object], context: ToolContext) -> str:
        assert arguments["path"] == "README.md"
        return README_TEXT


@pytest.fixture(params=["openai", "anthropic"])
def vendor(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeServer]]:
    server: FakeServer = FakeOpenAIServer() if request.param == "openai" else FakeAnthropicServer()
    with server:
        yield request.param, server


def vendor_settings(database_url: str, tmp_path: Path, kind: str, server: FakeServer) -> Any:
    provider_kind = "openai_compatible" if kind == "openai" else "anthropic"
    model = "gpt-4o-mini" if kind == "openai" else "claude-test-model"
    return make_settings(
        database_url,
        tmp_path,
        providers={"llm": {"kind": provider_kind, "base_url": server.base_url, "max_retries": 0}},
        model={"provider": "llm", "name": model},
        tools={"enabled": ["now", "read_file"]},
    )


TURN_CONTEXT = "<turn-context>"


def _block_text(block: dict[str, Any]) -> str:
    if block["type"] == "tool_result":
        inner = block["content"]
        return inner if isinstance(inner, str) else "".join(b["text"] for b in inner)
    return str(block.get("text", f"<{block['type']}>"))


def request_roles(kind: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each message the vendor received, system prompt and the turn's context
    excluded (the context follows the turn's own message; it is never stored)."""
    out = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(_block_text(block) for block in content)
        out.append((message["role"], (content or "").split(TURN_CONTEXT)[0].rstrip("\n")))
    return [pair for pair in out if pair[0] != "system"]


async def test_seed_three_turns_store_exactly_what_the_seed_says(
    database_url: str, tmp_path: Path, vendor: tuple[str, FakeServer]
) -> None:
    kind, server = vendor
    server.push(
        GREETING,
        ToolCalls(
            [Call("read_file", {"path": "README.md", "show_line_numbers": True}, id="call_abc123")]
        ),
        SUMMARY,
        THANKS,
    )
    app = create_app(
        vendor_settings(database_url, tmp_path, kind, server), extra_tools=[ReadFileTool()]
    )
    async with serve(app) as client:
        first = (await client.post("/api/chat/send", json={"message": "你好"})).json()
        session_id = first["session_id"]
        second = (
            await client.post(
                "/api/chat/send", json={"session_id": session_id, "message": "读取 README.md 文件"}
            )
        ).json()
        third = (
            await client.post("/api/chat/send", json={"session_id": session_id, "message": "谢谢"})
        ).json()
        async with app.state.services.database.read() as conn:
            message_rows = (await conn.execute(select(messages).order_by(messages.c.id))).all()
            tool_rows = (await conn.execute(select(tool_conversations))).all()

    assert [first["reply"], second["reply"], third["reply"]] == [GREETING, SUMMARY, THANKS]
    assert [(r.role, r.content) for r in message_rows] == [
        ("user", "你好"),
        ("assistant", GREETING),
        ("user", "读取 README.md 文件"),
        ("assistant", SUMMARY),
        ("user", "谢谢"),
        ("assistant", THANKS),
    ]
    assert {r.status for r in message_rows} == {"complete"}
    (tool,) = tool_rows
    assert tool.tool_name == "read_file"
    assert tool.tool_call_id == "call_abc123"
    assert tool.arguments == {"path": "README.md", "show_line_numbers": True}
    assert tool.result == README_TEXT
    assert tool.duration_ms >= 0 and tool.is_error is False
    assert tool.user_message == "读取 README.md 文件"
    assert tool.message_id == message_rows[3].id == second["assistant_message_id"]
    assert tool.session_id == session_id and tool.turn_id == message_rows[3].turn_id

    calls = [r for r in server.requests if r.path.endswith("/messages") or "chat" in r.path]
    assert len(calls) == 4
    # The second call of turn two carried the tool call and its result...
    tool_turn = request_roles(kind, calls[2].body)
    assert README_TEXT in "".join(text for _, text in tool_turn)
    # ...and the third turn's request holds only the stored texts: no tool messages, and the
    # turn's context (the time) only after its own message.
    sent = [m for m in calls[3].body["messages"] if m["role"] != "system"]
    assert [TURN_CONTEXT in str(m) for m in sent] == [False] * 4 + [True]
    assert request_roles(kind, calls[3].body) == [
        ("user", "你好"),
        ("assistant", GREETING),
        ("user", "读取 README.md 文件"),
        ("assistant", SUMMARY),
        ("user", "谢谢"),
    ]
    if kind == "openai":
        assert calls[3].body["messages"][0]["role"] == "system"
        assert all("tool_calls" not in m for m in calls[3].body["messages"])
    else:
        assert "You are Tally" in str(calls[3].body["system"])
