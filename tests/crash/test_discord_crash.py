"""`kill -9` while a Discord bot answers, then a restart: the reply reaches the channel exactly
once. The server dies with the reply stored but not sent, or after the first of its chunks was
sent; the restarted server sends what is missing, and neither the model nor Discord is asked
twice for what was done already.

The real server runs in a subprocess, connected over the gateway to a fake Discord in this
process."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from backend.channels.discord.format import MAX_CHARS, discord_chunks
from tests.crash import ServerFiles, TallyProcess, query, write_config
from tests.fakes import Text, last_user_text
from tests.fakes.discord_server import FakeDiscordServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.invariants import check_invariants

pytestmark = pytest.mark.process

TOKEN = "discord-crash-token"
SHORT_REPLY = "ok: hello bot"
# Paragraphs of words found once each, so a chunk sent twice or out of order shows.
LONG_REPLY = "\n\n".join(
    f"Paragraph {p}: " + " ".join(f"w{p}x{k}" for k in range(150)) for p in range(6)
)
assert len(discord_chunks(LONG_REPLY)) >= 3 and len(LONG_REPLY) > 2 * MAX_CHARS


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def discord_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDiscordServer]:
    monkeypatch.setenv("CRASH_DISCORD_TOKEN", TOKEN)  # the server process inherits it
    with FakeDiscordServer() as server:
        server.add_bot(TOKEN, user_id="800000000000000009", username="tally")
        yield server


def with_bot(files: ServerFiles, discord_fake: FakeDiscordServer) -> ServerFiles:
    config = yaml.safe_load(files.config.read_text(encoding="utf-8"))
    config["channels"] = {
        "dc": {
            "kind": "discord",
            "token_env": "CRASH_DISCORD_TOKEN",
            "allow_from": ["*"],
            "api_base_url": discord_fake.api_base_url,
            "gateway_url": discord_fake.gateway_url,
        }
    }
    files.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return files


@pytest.mark.parametrize(
    ("failpoint", "reply", "sent_before_crash"),
    [
        pytest.param("discord.before_reply", SHORT_REPLY, 0, id="before_reply"),
        pytest.param("discord.chunk_sent", LONG_REPLY, 1, id="chunk_sent"),
    ],
)
def test_kill_while_a_bot_replies_then_restart_sends_the_reply_exactly_once(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    discord_fake: FakeDiscordServer,
    failpoint: str,
    reply: str,
    sent_before_crash: int,
) -> None:
    files = with_bot(write_config(tmp_path, upstream_url=upstream.base_url), discord_fake)
    if reply == LONG_REPLY:
        upstream.push(Text(LONG_REPLY))
    message = discord_fake.message("hello bot")
    with TallyProcess(files, failpoints=(failpoint,)) as server:
        discord_fake.wait_connected(TOKEN)
        discord_fake.dispatch(TOKEN, "MESSAGE_CREATE", message)
        returncode = server.wait_for_exit(timeout_s=120)
        assert returncode == -signal.SIGKILL, f"the failpoint never fired\n{server.log_tail()}"
    assert len(discord_fake.sent()) == sent_before_crash

    chunks = discord_chunks(reply)
    with TallyProcess(files):
        sent = discord_fake.wait_for_sent(len(chunks))
        discord_fake.wait_connected(TOKEN, count=2)  # a new session: dispatches go to it
        discord_fake.dispatch(TOKEN, "MESSAGE_CREATE", discord_fake.message("and now?"))
        after = discord_fake.wait_for_sent(len(chunks) + 1)

    assert [s.content for s in sent] == chunks  # every chunk once, in order
    assert " ".join(s.content for s in sent).split() == reply.split()  # every word
    assert {str(s.reference["message_id"]) for s in sent if s.reference} == {message["id"]}
    assert len(after) == len(chunks) + 1 and after[-1].content == "ok: and now?"
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
