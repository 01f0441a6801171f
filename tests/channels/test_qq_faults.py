"""A QQ bot when QQ misbehaves or limits it: rate limits and 5xx answers waited out, an access
token QQ no longer takes got again once (and cached between sends otherwise), a long reply in
order within QQ's limits, and each passive reply's msg_seq claimed once, across restarts."""

from __future__ import annotations

import time
from pathlib import Path

from backend.channels.qq.format import MAX_CHARS, MAX_REPLIES
from backend.channels.qq.outbound import ReplySequence
from backend.storage.channel_updates import ChannelUpdateRepository
from tests.channels.qq_fixtures import serving_qq
from tests.conftest import fill
from tests.fakes import HttpError
from tests.fakes.qq_server import FakeQQServer


async def test_rate_limits_and_server_errors_are_waited_out(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url) as served:
        qq.fail_next("send", HttpError(429, "too many requests", retry_after="1"))
        qq.fail_next("send", HttpError(502, "bad gateway"))
        await served.deliver(qq.private_message("busy?"))
        (reply,) = await served.sent(1)
    assert qq.calls("send") == 3
    assert (reply.text, reply.msg_seq) == ("Hello from Tally.", 1)  # QQ took none before


async def test_an_access_token_qq_no_longer_takes_is_renewed_once(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url) as served:
        await served.deliver(qq.private_message("first"))
        await served.sent(1)
        await served.deliver(qq.private_message("second"))
        await served.sent(2)
        cached = qq.calls("token")
        qq.expire_tokens()
        await served.deliver(qq.private_message("third"))
        await served.sent(3)
    assert cached == 1  # the connect check's token served both replies
    assert qq.calls("token") == 2
    assert [
        r.headers["authorization"].startswith("QQBot ")
        for r in qq.requests
        if r.path.startswith("/v2/")
    ] == [True] * 4  # the refused send, and its retry


async def test_a_10000_character_reply_arrives_in_order_within_the_limits(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    paragraphs = [f"Paragraph {n}: " + " ".join(f"w{n}x{k}" for k in range(120)) for n in range(13)]
    reply = "\n\n".join(paragraphs)
    assert len(reply) > 10_000
    async with serving_qq(qq, tmp_path, database_url) as served:
        served.provider.push(reply)
        await served.deliver(qq.private_message("tell me a lot"))
        await served.settle()
        chunks = qq.sent()
        stored = await served.stored()
    assert 1 < len(chunks) <= MAX_REPLIES and all(len(c.text) <= MAX_CHARS for c in chunks)
    assert [c.msg_seq for c in chunks] == list(range(1, len(chunks) + 1))
    assert " ".join(c.text for c in chunks).split() == reply.split()
    assert stored[-1] == ("assistant", reply)


async def test_a_retried_send_qq_had_taken_already_counts_as_sent(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    """A 5xx after QQ kept the message: the retry's same msg_seq is refused as a duplicate,
    which says it arrived."""
    async with serving_qq(qq, tmp_path, database_url) as served:
        qq.fail_next("send", HttpError(503, "kept, then failed"), after_keeping=True)
        await served.deliver(qq.private_message("did it arrive?"))
        await served.settle()
        health = await served.client.get("/api/health")
    (reply,) = qq.sent()
    assert reply.msg_seq == 1 and qq.calls("send") == 2
    (bot,) = [c for c in health.json()["channels"] if c["kind"] == "qq"]
    assert bot["last_error"] is None


async def test_msg_seq_continues_across_processes_and_restarts(
    qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_qq(qq, tmp_path, database_url) as served:
        updates = ChannelUpdateRepository(served.app.state.services.database)
        first = ReplySequence(updates, tenant_id="default", bot="qb")
        taken = [await first.next("msg-1"), await first.next("msg-1")]
        restarted = ReplySequence(updates, tenant_id="default", bot="qb")  # forgot them
        taken += [await restarted.next("msg-1"), await restarted.next("msg-2")]
        other_bot = ReplySequence(updates, tenant_id="default", bot="other")
        taken.append(await other_bot.next("msg-1"))
    assert taken == [1, 2, 3, 1, 1]


async def test_a_webhook_call_that_cannot_be_kept_is_503_and_its_retry_answered_once(
    small_disk: Path, tmp_path: Path, qq: FakeQQServer
) -> None:
    """Not told "received" ({"op":12}): QQ delivers it again (signed anew), and it is kept then.
    The signature of the refused call may be claimed already: an identical resend is a replay."""
    database_url = f"sqlite+aiosqlite:///{small_disk / 'tally.db'}"
    async with serving_qq(qq, tmp_path, database_url) as served:
        event = qq.private_message("kept at last")
        event["padding"] = "x" * 90_000
        filler = fill(small_disk)
        refused = await served.deliver(event)
        filler.unlink()
        retried = await served.deliver(event, timestamp=int(time.time()) + 1)
        again = await served.deliver(event, timestamp=int(time.time()) + 2)
        await served.sent(1)
        await served.settle()
        stored = await served.stored()
    assert refused.status_code == 503 and "Retry-After" in refused.headers
    assert retried.json() == again.json() == {"op": 12, "d": 0}
    assert stored == [("user", "kept at last"), ("assistant", "Hello from Tally.")]
    assert len(qq.sent()) == 1
