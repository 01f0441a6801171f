"""`kill -9` while a Telegram bot answers, then a restart: the reply reaches the chat exactly
once. The server dies with the reply stored but not sent, or after the first of its chunks was
sent; the restarted server sends what is missing, and neither the model nor Telegram is asked
twice for what was done already.

The real server runs in a subprocess, polling a fake Bot API in this process."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from backend.channels.telegram.format import telegram_chunks
from tests.crash import ServerFiles, TallyProcess, query, write_config
from tests.fakes import Text, last_user_text
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

TOKEN = "424242:crash-token"
LONG_REPLY = " ".join(f"word{n}" for n in range(1500))  # four Telegram messages


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def telegram(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTelegramServer]:
    monkeypatch.setenv("CRASH_TG_TOKEN", TOKEN)  # the server process inherits it
    with FakeTelegramServer() as server:
        server.add_bot(TOKEN, username="crash_bot")
        yield server


def with_bot(files: ServerFiles, telegram: FakeTelegramServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "tg": {
            "kind": "telegram",
            "token_env": "CRASH_TG_TOKEN",
            "allow_from": ["*"],
            "api_base_url": telegram.base_url,
            "poll_timeout_s": 1,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash"),
    [
        ("telegram.before_reply", "ok: hello bot", 0),
        ("telegram.chunk_sent", LONG_REPLY, 1),
    ],
)
def test_kill_while_a_bot_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    telegram: FakeTelegramServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
) -> None:
    files = with_bot(write_config(tmp_path, upstream_url=upstream.base_url), telegram)
    if reply == LONG_REPLY:
        upstream.push(Text(LONG_REPLY))
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        telegram.push_update(TOKEN, telegram.user_message("hello bot"))
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert len(telegram.sent(42, "sendMessage")) == sent_before_crash

    with TallyProcess(files):
        sent = telegram.wait_for_sent(len_chunks(reply), chat_id=42, method="sendMessage")
        telegram.push_update(TOKEN, telegram.user_message("and now?"))
        after = telegram.wait_for_sent(len_chunks(reply) + 1, chat_id=42, method="sendMessage")

    assert "".join(m.text for m in sent) == reply  # every word, once, in order
    assert after[-1].text == "ok: and now?"
    assert [last_user_text(r.body) for r in upstream.requests] == [
        "hello bot",
        "and now?",
    ]  # the stored reply was sent, not asked for again
    updates = query(files.database, "SELECT status, chunks_sent FROM channel_updates")
    assert [(u["status"], u["chunks_sent"]) for u in updates] == [
        ("answered", len_chunks(reply)),
        ("answered", 1),
    ]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)


def len_chunks(reply: str) -> int:
    return len(telegram_chunks(reply))
