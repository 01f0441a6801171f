"""`tally chat`: a chat in the terminal."""

from __future__ import annotations

from pathlib import Path

from tests.cli.runner import config, tally


def test_terminal_chat_streams_a_demo_reply(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "chat", stdin="hello there\n\n")
    assert result.returncode == 0
    assert "demo provider" in result.stdout and "hello there" in result.stdout
