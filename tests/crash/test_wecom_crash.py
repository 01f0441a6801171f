"""`kill -9` while a WeCom app (or robot) answers, then a restart: the reply reaches the chat
exactly once. The server dies with the reply stored but not sent, or after the first of its
chunks was sent; the restarted server sends what is missing, and neither the model nor WeCom
is asked twice for what was done already.

The real server runs in a subprocess; WeCom's callbacks are posted to it as WeCom posts them
(encrypted, signed), and it replies to a fake WeCom in this process; a robot connects to a
fake long connection in this process, and its restarted self answers the message's req_id."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from backend.channels.wecom.format import MAX_BYTES, ROBOT_MAX_BYTES, wecom_chunks
from tests.crash import ServerFiles, TallyProcess, query, write_config
from tests.fakes import Text, last_user_text
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.wecom_robot_server import FakeRobotServer
from tests.fakes.wecom_server import App, FakeWeComServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

APP = App(
    corp_id="ww-crash-corp",
    agent_id=1000009,
    secret="wecom-crash-secret",
    token="crashtoken",
    aes_key="abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
)
SHORT_REPLY = "ok: hello app"
# Paragraphs of words found once each, so a chunk sent twice or out of order shows.
LONG_REPLY = "\n\n".join(
    f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(150)) for p in range(12)
)
assert len(wecom_chunks(LONG_REPLY)) >= 3 and len(LONG_REPLY.encode()) > 2 * MAX_BYTES


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def wecom(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWeComServer]:
    monkeypatch.setenv("CRASH_WC_SECRET", APP.secret)  # the server process inherits them
    monkeypatch.setenv("CRASH_WC_TOKEN", APP.token)
    monkeypatch.setenv("CRASH_WC_AES_KEY", APP.aes_key)
    with FakeWeComServer() as server:
        server.add_app(APP)
        yield server


def with_app(files: ServerFiles, wecom: FakeWeComServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "wc": {
            "kind": "wecom",
            "mode": "app",
            "corp_id": APP.corp_id,
            "agent_id": APP.agent_id,
            "secret_env": "CRASH_WC_SECRET",
            "token_env": "CRASH_WC_TOKEN",
            "aes_key_env": "CRASH_WC_AES_KEY",
            "allow_from": ["*"],
            "api_base_url": wecom.base_url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


def post(server: TallyProcess, wecom: FakeWeComServer, text: str) -> None:
    query_string, body = wecom.callback(APP, wecom.message_xml(text, app=APP))
    with server.client() as client:
        answer = client.post("/channels/default/wc", params=query_string, content=body)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash"),
    [
        pytest.param("wecom.before_reply", SHORT_REPLY, 0, id="before_reply"),
        pytest.param("wecom.chunk_sent", LONG_REPLY, 1, id="chunk_sent"),
    ],
)
def test_kill_while_an_app_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    wecom: FakeWeComServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
) -> None:
    files = with_app(write_config(tmp_path, upstream_url=upstream.base_url), wecom)
    if reply == LONG_REPLY:
        upstream.push(Text(LONG_REPLY))
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        post(server, wecom, "hello app")  # acknowledged: kept before the reply is made
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert len(wecom.sent()) == sent_before_crash

    chunks = wecom_chunks(reply)
    with TallyProcess(files) as server:
        sent = wecom.wait_for_sent(len(chunks))
        post(server, wecom, "and now?")
        after = wecom.wait_for_sent(len(chunks) + 1)

    assert [s.content for s in sent] == chunks  # every chunk once, in order
    assert " ".join(s.content for s in sent).split() == reply.split()  # every word
    assert len(after) == len(chunks) + 1 and after[-1].content == "ok: and now?"
    assert [last_user_text(r.body) for r in upstream.requests] == ["hello app", "and now?"]
    updates = query(
        files.database,
        "SELECT status, chunks_sent FROM channel_updates WHERE status != 'proof' ORDER BY id",
    )
    assert [(u["status"], u["chunks_sent"]) for u in updates] == [
        ("answered", len(chunks)),
        ("answered", 1),
    ]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)


ROBOT_LONG_REPLY = "\n\n".join(
    f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(150)) for p in range(40)
)
assert len(wecom_chunks(ROBOT_LONG_REPLY, limit=ROBOT_MAX_BYTES)) >= 2


@pytest.fixture
def robot(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRobotServer]:
    monkeypatch.setenv("CRASH_WR_SECRET", "robot-crash-secret")
    with FakeRobotServer("aib-crash", "robot-crash-secret") as server:
        yield server


def with_robot(files: ServerFiles, robot: FakeRobotServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "wr": {
            "kind": "wecom",
            "mode": "robot",
            "bot_id": "aib-crash",
            "bot_secret_env": "CRASH_WR_SECRET",
            "allow_from": ["*"],
            "ws_url": robot.url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash"),
    [
        pytest.param("wecom.before_reply", "ok: hello robot", 0, id="before_reply"),
        pytest.param("wecom.chunk_sent", ROBOT_LONG_REPLY, 1, id="chunk_sent"),
    ],
)
def test_kill_while_a_robot_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    robot: FakeRobotServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
) -> None:
    files = with_robot(write_config(tmp_path, upstream_url=upstream.base_url), robot)
    if reply == ROBOT_LONG_REPLY:
        upstream.push(Text(ROBOT_LONG_REPLY))
    message = robot.message("hello robot")
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        robot.wait_connected(1)
        robot.push(message)
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert len(robot.replies()) == sent_before_crash

    chunks = wecom_chunks(reply, limit=ROBOT_MAX_BYTES)
    with TallyProcess(files):
        sent = robot.wait_for_replies(len(chunks))
        robot.wait_connected(2)  # a push goes to the new connection
        robot.push(robot.message("and now?"))
        after = robot.wait_for_replies(len(chunks) + 1)

    assert [r.content for r in sent] == chunks  # every chunk once, in order
    assert {r.req_id for r in sent} == {message["headers"]["req_id"]}  # answering the message
    assert after[-1].content == "ok: and now?"
    asked = [last_user_text(r.body) for r in upstream.requests]  # a long reply is summarized too
    assert [text for text in asked if text in ("hello robot", "and now?")] == [
        "hello robot",
        "and now?",
    ]
    updates = query(
        files.database,
        "SELECT status, chunks_sent FROM channel_updates WHERE status != 'proof' ORDER BY id",
    )
    assert [(u["status"], u["chunks_sent"]) for u in updates] == [
        ("answered", len(chunks)),
        ("answered", 1),
    ]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)
