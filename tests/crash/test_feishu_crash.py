"""`kill -9` while a Feishu bot answers, then a restart: the reply reaches the chat exactly
once. The server dies with the reply stored but not sent, or after the first of its chunks was
sent; the restarted server sends what is missing, and neither the model nor Feishu is asked
twice for what was done already.

The real server runs in a subprocess, connected over the SDK's long connection to a fake
Feishu in this process."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from backend.channels.feishu.format import MAX_CHARS, feishu_chunks
from tests.crash import ServerFiles, TallyProcess, query, write_config
from tests.fakes import Text, last_user_text
from tests.fakes.feishu_server import FakeFeishuServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

APP_ID = "cli_crash_app"
APP_SECRET = "feishu-crash-secret"
SHORT_REPLY = "ok: hello bot"
# Paragraphs of words found once each, so a chunk sent twice or out of order shows.
LONG_REPLY = "\n\n".join(
    f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(150)) for p in range(12)
)
assert len(feishu_chunks(LONG_REPLY)) >= 3 and len(LONG_REPLY) > 2 * MAX_CHARS


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def feishu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFeishuServer]:
    monkeypatch.setenv("CRASH_FS_APP_SECRET", APP_SECRET)  # the server process inherits it
    with FakeFeishuServer() as server:
        server.add_app(APP_ID, APP_SECRET)
        yield server


def with_bot(files: ServerFiles, feishu: FakeFeishuServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "fs": {
            "kind": "feishu",
            "mode": "websocket",
            "app_id": APP_ID,
            "app_secret_env": "CRASH_FS_APP_SECRET",
            "allow_from": ["*"],
            "base_url": feishu.base_url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash"),
    [
        pytest.param("feishu.before_reply", SHORT_REPLY, 0, id="before_reply"),
        pytest.param("feishu.chunk_sent", LONG_REPLY, 1, id="chunk_sent"),
    ],
)
def test_kill_while_a_bot_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    feishu: FakeFeishuServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
) -> None:
    files = with_bot(write_config(tmp_path, upstream_url=upstream.base_url), feishu)
    if reply == LONG_REPLY:
        upstream.push(Text(LONG_REPLY))
    event = feishu.message_event("hello bot", app_id=APP_ID)
    message_id = event["event"]["message"]["message_id"]
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        feishu.wait_connected(APP_ID)
        frame = feishu.push(APP_ID, event)
        assert feishu.wait_for_ack(frame)["code"] == 200  # kept, then acknowledged
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert len(feishu.sent()) == sent_before_crash

    chunks = feishu_chunks(reply)
    with TallyProcess(files):
        sent = feishu.wait_for_sent(len(chunks))
        feishu.wait_connected(APP_ID, count=2)  # a push goes to the new connection
        feishu.push(APP_ID, feishu.message_event("and now?", app_id=APP_ID))
        after = feishu.wait_for_sent(len(chunks) + 1)

    assert [s.text for s in sent] == chunks  # every chunk once, in order
    assert " ".join(s.text for s in sent).split() == reply.split()  # every word
    assert {s.reply_to for s in sent} == {message_id}
    assert after[-1].text == "ok: and now?"
    assert [last_user_text(r.body) for r in upstream.requests] == [
        "hello bot",
        "and now?",
    ]  # the stored reply was sent, not asked for again
    updates = query(files.database, "SELECT status, chunks_sent FROM channel_updates ORDER BY id")
    assert [(u["status"], u["chunks_sent"]) for u in updates] == [
        ("answered", len(chunks)),
        ("answered", 1),
    ]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)
