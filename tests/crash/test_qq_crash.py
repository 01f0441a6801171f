"""`kill -9` while a QQ bot answers, then a restart: the reply reaches the chat exactly once.
The server dies with the reply stored but not sent, or after the first of its chunks was sent;
the restarted server sends what is missing with the next msg_seq of the message (QQ refuses
one used already), and neither the model nor QQ is asked twice for what was done already.

The real server runs in a subprocess, connected over the websocket gateway to a fake QQ in this
process."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from backend.channels.qq.format import CHUNK_CHARS, qq_chunks
from tests.crash import ServerFiles, TallyProcess, query, write_config
from tests.fakes import Text, last_user_text
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.qq_server import FakeQQServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

APP_ID = "102000777"
APP_SECRET = "qq-crash-secret"
SHORT_REPLY = "ok: hello bot"
# Paragraphs of words found once each, so a chunk sent twice or out of order shows.
LONG_REPLY = "\n\n".join(
    f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(150)) for p in range(12)
)
assert len(qq_chunks(LONG_REPLY)) >= 3 and len(LONG_REPLY) > 2 * CHUNK_CHARS


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def qq(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeQQServer]:
    monkeypatch.setenv("CRASH_QQ_SECRET", APP_SECRET)  # the server process inherits it
    with FakeQQServer() as server:
        server.add_app(APP_ID, APP_SECRET)
        yield server


def with_bot(files: ServerFiles, qq: FakeQQServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "qb": {
            "kind": "qq",
            "mode": "websocket",
            "app_id": APP_ID,
            "app_secret_env": "CRASH_QQ_SECRET",
            "allow_from": ["*"],
            "api_base_url": qq.base_url,
            "token_base_url": qq.base_url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash"),
    [
        pytest.param("qq.before_reply", SHORT_REPLY, 0, id="before_reply"),
        pytest.param("qq.chunk_sent", LONG_REPLY, 1, id="chunk_sent"),
    ],
)
def test_kill_while_a_qq_bot_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    qq: FakeQQServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
) -> None:
    files = with_bot(write_config(tmp_path, upstream_url=upstream.base_url), qq)
    if reply == LONG_REPLY:
        upstream.push(Text(LONG_REPLY))
    message = qq.private_message("hello bot")
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        qq.wait_connected(APP_ID)
        qq.push(APP_ID, message)
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert len(qq.sent()) == sent_before_crash

    chunks = qq_chunks(reply)
    with TallyProcess(files):
        sent = qq.wait_for_sent(len(chunks))
        qq.wait_connected(APP_ID, count=2)  # a push goes to the new connection
        qq.push(APP_ID, qq.private_message("and now?"))
        after = qq.wait_for_sent(len(chunks) + 1)

    assert [s.text for s in sent] == chunks  # every chunk once, in order
    assert " ".join(s.text for s in sent).split() == reply.split()  # every word
    assert [(s.msg_id, s.msg_seq) for s in sent] == [
        (message["d"]["id"], seq) for seq in range(1, len(chunks) + 1)
    ]  # the sequence continued after the restart
    assert len(after) == len(chunks) + 1 and after[-1].text == "ok: and now?"
    assert [last_user_text(r.body) for r in upstream.requests] == [
        "hello bot",
        "and now?",
    ]  # the stored reply was sent, not asked for again
    updates = query(
        files.database,
        "SELECT status, chunks_sent FROM channel_updates WHERE status != 'proof' ORDER BY id",
    )
    assert [(u["status"], u["chunks_sent"]) for u in updates] == [
        ("answered", len(chunks)),
        ("answered", 1),
    ]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)
