"""`kill -9` while a Slack bot answers, then a restart: the reply reaches the thread exactly
once. The server dies with the reply stored but not sent, or after the first of its chunks was
sent; the restarted server sends what is missing, and neither the model nor Slack is asked
twice for what was done already.

The real server runs in a subprocess, connected over Socket Mode to a fake Slack in this
process. The envelope was acknowledged before the crash (it was kept first): Slack does not
deliver it again, so the reply comes from what the dead server kept."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from backend.channels.slack.format import slack_chunks
from tests.crash import ServerFiles, TallyProcess, query, write_config
from tests.fakes import Text, last_user_text
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.slack_server import FakeSlackServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

BOT_TOKEN = "xoxb-crash"
APP_TOKEN = "xapp-crash"
SHORT_REPLY = "ok: hello slack"
# Paragraphs of words found once each, so a chunk sent twice or out of order shows.
LONG_REPLY = "\n\n".join(
    f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(150)) for p in range(12)
)
assert len(slack_chunks(LONG_REPLY)) >= 3


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlackServer]:
    monkeypatch.setenv("CRASH_SLACK_BOT_TOKEN", BOT_TOKEN)  # the server process inherits them
    monkeypatch.setenv("CRASH_SLACK_APP_TOKEN", APP_TOKEN)
    with FakeSlackServer(bot_token=BOT_TOKEN, app_token=APP_TOKEN) as server:
        yield server


def with_bot(files: ServerFiles, slack: FakeSlackServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "sl": {
            "kind": "slack",
            "mode": "socket",
            "bot_token_env": "CRASH_SLACK_BOT_TOKEN",
            "app_token_env": "CRASH_SLACK_APP_TOKEN",
            "allow_from": ["*"],
            "api_base_url": slack.api_url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash"),
    [
        pytest.param("slack.before_reply", SHORT_REPLY, 0, id="before_reply"),
        pytest.param("slack.chunk_sent", LONG_REPLY, 1, id="chunk_sent"),
    ],
)
def test_kill_while_a_bot_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    slack: FakeSlackServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
) -> None:
    files = with_bot(write_config(tmp_path, upstream_url=upstream.base_url), slack)
    if reply == LONG_REPLY:
        upstream.push(Text(LONG_REPLY))
    event = slack.event("hello slack", channel="C0TEAM", kind="app_mention")
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        slack.wait_connected()
        envelope = slack.push(event)
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert envelope in slack.acks  # acknowledged once kept, before the reply
    assert len(slack.sent()) == sent_before_crash

    chunks = slack_chunks(reply)
    with TallyProcess(files):
        sent = slack.wait_for_sent(len(chunks))
        slack.wait_connected(count=2)  # a push goes to the new socket
        slack.push(slack.event("and now?", channel="C0TEAM", kind="app_mention"))
        after = slack.wait_for_sent(len(chunks) + 1)

    assert [s.text for s in sent] == chunks  # every chunk once, in order
    assert " ".join(s.text for s in sent).split() == reply.split()  # every word
    assert {s.thread_ts for s in sent} == {event["event"]["ts"]}  # all in the mention's thread
    assert len(after) == len(chunks) + 1 and after[-1].text == "ok: and now?"
    assert [last_user_text(r.body) for r in upstream.requests] == ["hello slack", "and now?"]
    updates = query(files.database, "SELECT status, chunks_sent FROM channel_updates ORDER BY id")
    assert [(u["status"], u["chunks_sent"]) for u in updates] == [
        ("answered", len(chunks)),
        ("answered", 1),
    ]
    check_invariants(files.database, files.memory, data_dir=files.data_dir)
