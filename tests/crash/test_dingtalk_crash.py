"""`kill -9` while a DingTalk robot answers, then a restart: the reply reaches the conversation
exactly once. The server dies with the reply stored but not sent, or after the first of its
chunks was sent; the restarted server sends what is missing, and neither the model nor DingTalk
is asked twice for what was done already. The message's session webhook is still valid after
the restart, or it expired meanwhile and the rest of the reply goes by the OpenAPI.

The real server runs in a subprocess, connected over Stream mode to a fake DingTalk in this
process."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from backend.channels.dingtalk.format import MAX_CHARS, dingtalk_chunks
from tests.crash import ServerFiles, TallyProcess, query, write_config
from tests.fakes import Text, last_user_text
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

CLIENT_ID = "ding-crash-client"
CLIENT_SECRET = "ding-crash-secret"
ROBOT = "ding-crash-robot"
STAFF_ID = "staff-1"  # the sender of the fake's private messages: the OpenAPI's target
SHORT_REPLY = "ok: hello robot"
# Paragraphs of words found once each, so a chunk sent twice or out of order shows.
LONG_REPLY = "\n\n".join(
    f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(150)) for p in range(12)
)
assert len(dingtalk_chunks(LONG_REPLY)) >= 3 and len(LONG_REPLY) > 2 * MAX_CHARS


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def dingtalk(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDingTalkServer]:
    monkeypatch.setenv("CRASH_DT_CLIENT_ID", CLIENT_ID)  # the server process inherits them
    monkeypatch.setenv("CRASH_DT_CLIENT_SECRET", CLIENT_SECRET)
    with FakeDingTalkServer() as server:
        server.add_app(CLIENT_ID, CLIENT_SECRET, ROBOT)
        yield server


def with_robot(files: ServerFiles, dingtalk: FakeDingTalkServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "dt": {
            "kind": "dingtalk",
            "mode": "stream",
            "client_id_env": "CRASH_DT_CLIENT_ID",
            "client_secret_env": "CRASH_DT_CLIENT_SECRET",
            "robot_code": ROBOT,
            "allow_from": ["*"],
            "openapi_base_url": dingtalk.base_url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash", "webhook_expires"),
    [
        pytest.param("dingtalk.before_reply", SHORT_REPLY, 0, False, id="before_reply"),
        pytest.param("dingtalk.chunk_sent", LONG_REPLY, 1, False, id="chunk_sent"),
        pytest.param("dingtalk.chunk_sent", LONG_REPLY, 1, True, id="chunk_sent-webhook-expired"),
    ],
)
def test_kill_while_a_robot_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    dingtalk: FakeDingTalkServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
    webhook_expires: bool,
) -> None:
    files = with_robot(write_config(tmp_path, upstream_url=upstream.base_url), dingtalk)
    if reply == LONG_REPLY:
        upstream.push(Text(LONG_REPLY))
    message = dingtalk.robot_message("hello robot", robot_code=ROBOT)
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        dingtalk.wait_connected(CLIENT_ID)
        dingtalk.push(CLIENT_ID, message)
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert len(dingtalk.sent()) == sent_before_crash
    if webhook_expires:  # while the server is dead: the restarted one learns it from DingTalk
        dingtalk.expire_session(message["sessionWebhook"])

    chunks = dingtalk_chunks(reply)
    with TallyProcess(files):
        sent = dingtalk.wait_for_sent(len(chunks))
        dingtalk.wait_connected(CLIENT_ID, count=2)  # a push goes to the new connection
        dingtalk.push(CLIENT_ID, dingtalk.robot_message("and now?", robot_code=ROBOT))
        after = dingtalk.wait_for_sent(len(chunks) + 1)

    assert [s.text for s in sent] == chunks  # every chunk once, in order
    assert " ".join(s.text for s in sent).split() == reply.split()  # every word
    session = message["sessionWebhook"].rsplit("session=", 1)[1]
    if webhook_expires:  # the first chunk by the webhook, the rest by the OpenAPI
        expected = [("session", session)] + [("batchSend", STAFF_ID)] * (len(chunks) - 1)
    else:
        expected = [("session", session)] * len(chunks)
    assert [(s.via, s.target) for s in sent] == expected
    assert len(after) == len(chunks) + 1
    assert (after[-1].via, after[-1].text) == ("session", "ok: and now?")
    assert [last_user_text(r.body) for r in upstream.requests] == [
        "hello robot",
        "and now?",
    ]  # the stored reply was sent, not asked for again
    updates = query(files.database, "SELECT status, chunks_sent FROM channel_updates ORDER BY id")
    assert [(u["status"], u["chunks_sent"]) for u in updates] == [
        ("answered", len(chunks)),
        ("answered", 1),
    ]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)
