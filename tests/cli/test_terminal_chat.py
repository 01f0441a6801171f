"""`tally chat`: a chat in the terminal, driven through a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runner import config, tally
from tests.cli.terminal import CTRL_C, CTRL_D, UP, Terminal
from tests.fakes import RecordedRequest, Reply, words
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.process

LEFT = b"\x1b[D"
SESSION_ID = re.compile(r"session ([0-9a-f-]{36})")


def said(text: str) -> str:
    """How the demo provider quotes what it was told."""
    return re.escape(f"You said: “{text}”")


def test_terminal_chat_streams_a_demo_reply(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "chat", stdin="hello there\n\n")
    assert result.returncode == 0
    assert "demo provider" in result.stdout and "hello there" in result.stdout


def test_the_terminal_renders_the_replys_markdown_and_says_demo_once(tmp_path: Path) -> None:
    with Terminal("--config", str(config(tmp_path)), "chat") as terminal:
        terminal.expect("you> ")
        terminal.send("hello there\r")
        terminal.expect("To talk to one, .* and restart")
        terminal.expect("you> ")
        terminal.send("and again\r")
        terminal.expect(said("and again"))
        terminal.expect("you> ")
        terminal.send(CTRL_D)
        assert terminal.wait_exit() == 0
    # The notice is in italics, drawn as such, not as the marks around it.
    assert b"\x1b[3mThis is Tally's built-in demo provider" in terminal.raw
    assert "*This is" not in terminal.screen and "restart.*" not in terminal.screen
    assert terminal.screen.count("no real model is answering") == 1


def test_arrow_keys_edit_the_line_and_recall_earlier_ones(tmp_path: Path) -> None:
    with Terminal("--config", str(config(tmp_path)), "chat") as terminal:
        terminal.expect("you> ")
        terminal.send("hello there\r")
        terminal.expect(said("hello there"))
        terminal.expect("you> ")
        terminal.send(b"wrld" + LEFT * 3 + b"o\r")  # the cursor moves back; "o" goes in
        terminal.expect(said("world"))
        terminal.expect("you> ")
        terminal.send(UP + UP)  # two lines back
        terminal.expect("hello there")
        terminal.send("\r")
        terminal.expect(said("hello there"))
        terminal.expect("you> ")
        terminal.send(CTRL_D)
        assert terminal.wait_exit() == 0
    assert "^[[" not in terminal.screen and "\x1b[D" not in terminal.screen
    history = (tmp_path / "data" / "chat_history").read_text(encoding="utf-8")
    assert "world" in history and "hello there" in history  # Up-arrow finds them next time


def test_ctrl_c_at_the_prompt_quits_without_enter(tmp_path: Path) -> None:
    with Terminal("--config", str(config(tmp_path)), "chat") as terminal:
        terminal.expect("you> ")
        terminal.send("half a line")  # typed, never sent
        terminal.expect("half a line")
        terminal.wait_reading()
        terminal.send(CTRL_C)
        assert terminal.wait_exit() in (0, 130)
    assert "Traceback" not in terminal.screen


@dataclass(frozen=True)
class Stall:
    """Stream `text`, then nothing more until the client hangs up: a reply to cancel."""

    text: str


class StallingOpenAIServer(FakeOpenAIServer):
    """The fake OpenAI server, with one more step: `Stall`."""

    async def answer(self, step: Any, request: RecordedRequest, reply: Reply) -> None:
        if not isinstance(step, Stall):
            await super().answer(step, request, reply)
            return
        await reply.start_stream()
        for piece in words(step.text):
            choice = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
            chunk = {
                "id": "chatcmpl-stall",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake-model",
                "choices": [choice],
            }
            await reply.send(f"data: {json.dumps(chunk)}\n\n")
        await asyncio.Event().wait()  # until stop() cancels this connection


@pytest.fixture
def stalling_server() -> Iterator[StallingOpenAIServer]:
    with StallingOpenAIServer() as server:
        yield server


def test_ctrl_c_during_a_reply_cancels_it_and_keeps_the_words_shown(
    tmp_path: Path, stalling_server: StallingOpenAIServer
) -> None:
    stalling_server.push(Stall("Once upon a time"))
    path = config(
        tmp_path,
        f"providers:\n  fake: {{kind: openai_compatible, base_url: {stalling_server.base_url!r}}}\n"
        "model: {provider: fake, name: fake-model}\n",
    )
    with Terminal("--config", str(path), "chat") as terminal:
        banner = terminal.expect("you> ")
        terminal.send("tell me a story\r")
        terminal.expect("Once upon a time")
        terminal.send(CTRL_C)
        terminal.expect(re.escape("[cancelled]"))
        terminal.expect("you> ")  # the prompt is back, the chat goes on
        terminal.send("and now?\r")
        terminal.expect("ok: and now?")  # the fake server's default reply
        terminal.expect("you> ")
        terminal.wait_reading()
        terminal.send(CTRL_C)
        assert terminal.wait_exit() in (0, 130)
    found = SESSION_ID.search(banner)
    assert found is not None
    again = tally("--config", str(path), "chat", "--session", found.group(1))
    assert again.returncode == 0
    assert (
        "  you: tell me a story\n"
        "  Tally (incomplete): Once upon a time\n"
        "    [cancelled]\n"
        "  you: and now?\n"
        "  Tally: ok: and now?\n"
    ) in again.stdout


def test_session_shows_the_last_ten_messages_before_the_prompt(tmp_path: Path) -> None:
    # A scripted model, not the demo: the demo's window (8 messages) would hold fewer than 10.
    scripted = "providers: {fake: {kind: scripted}}\nmodel: {provider: fake, name: m}\n"
    path = str(config(tmp_path, scripted))
    lines = [f"line {n}" for n in ("one", "two", "three", "four", "five", "six")]
    first = tally("--config", path, "chat", stdin="\n".join(lines) + "\n")
    found = SESSION_ID.search(first.stdout)
    assert first.returncode == 0 and found is not None
    with Terminal("--config", path, "chat", "--session", found.group(1)) as terminal:
        screen = terminal.expect("you> ")
        terminal.send(CTRL_D)
        assert terminal.wait_exit() == 0
    recap = screen[screen.index("The last 10 messages") :]
    assert "you: line one" not in recap  # the 12 messages' two oldest are left out
    speakers = [line.split(":")[0] for line in recap.splitlines() if re.match(r"  \S", line)]
    assert speakers[:10] == ["  you", "  Tally"] * 5
    assert "you: line two" in recap and "you: line six" in recap
    assert recap.index("you: line two") < recap.index("you: line six") < recap.index("you> ")


def test_an_unknown_session_is_a_clear_error(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "chat", "--session", "no-such-session")
    assert result.returncode == 1
    assert "no session 'no-such-session'" in result.stderr
    assert "without --session" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_command_prints_alembic_log_lines(tmp_path: Path) -> None:
    path = str(config(tmp_path))
    created = tally("--config", path, "migrate")
    outputs = [
        created,
        tally("--config", path, "migrate"),
        tally("--config", path, "memory", "show"),
        tally("--config", path, "chat", stdin="hi\n"),
    ]
    with Terminal("--config", path, "chat") as terminal:
        terminal.expect("you> ")
        terminal.send(CTRL_D)
        assert terminal.wait_exit() == 0
    assert all(result.returncode == 0 for result in outputs)
    for text in [terminal.screen, *(r.stdout + r.stderr for r in outputs)]:
        text = text.replace(str(tmp_path), "<tmp>")  # the test's own folder is named for it
        assert "alembic" not in text and "Context impl" not in text, text
    # A migration that runs a revision says so, once; one with nothing to do is silent.
    assert created.stderr.count("database schema created at revision") == 1
    assert "database schema" not in outputs[1].stderr


def test_a_failed_turn_shows_its_error_when_the_session_is_continued(
    tmp_path: Path, refused_port: int
) -> None:
    dead = refused_port
    path = str(
        config(
            tmp_path,
            f"providers: {{acme: {{kind: openai_compatible, api_key_env: ACME_KEY,"
            f" base_url: 'http://127.0.0.1:{dead}/v1', max_retries: 0}}}}\n"
            "model: {provider: acme, name: m}\n",
        )
    )
    env = {"ACME_KEY": "sk-test"}
    first = tally("--config", path, "chat", stdin="hello there\n", env=env)
    shown = f"[error provider_unavailable: acme (http://127.0.0.1:{dead}/v1): connection refused]"
    assert shown in first.stdout
    session_id = SESSION_ID.search(first.stdout)
    assert session_id is not None
    with Terminal("--config", path, "chat", "--session", session_id.group(1), env=env) as terminal:
        recap = terminal.expect("you> ")
        terminal.send(CTRL_D)
        assert terminal.wait_exit() == 0
    assert "you: hello there" in recap and shown in recap  # as it said when the turn failed
