"""A Feishu bot when Feishu is difficult: a token it no longer takes renewed once, rate limits
(HTTP 429, code 99991400) and its own 5xx waited out with backoff, and a long reply cut into
ordered messages within the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.channels.feishu.format import MAX_CHARS
from tests.channels.feishu_fixtures import feishu_settings, serving_feishu
from tests.conftest import fill
from tests.fakes.feishu_server import INVALID_TOKEN, RATE_LIMITED, FakeFeishuServer


async def test_a_token_feishu_no_longer_takes_is_renewed_once(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        await served.push(served.message("first"))
        await served.sent(1)
        feishu.expire_tokens()
        await served.push(served.message("second"))
        await served.sent(2)
        feishu.fail_next("reply", 400, INVALID_TOKEN)  # refused twice: renewed once, then said
        feishu.fail_next("reply", 400, INVALID_TOKEN)
        await served.push(served.message("third"))
        await served.settle()
    assert feishu.calls("token") == 3  # the first; after the expiry; after the scripted refusal
    assert [s.text for s in feishu.sent()] == ["Hello from Tally.", "Hello from Tally."]
    assert feishu.calls("reply") == 1 + 2 + 2  # a refused token: renewed, tried once more


@pytest.mark.slow
async def test_rate_limits_and_feishus_own_trouble_are_waited_out(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        feishu.fail_next("reply", 429, RATE_LIMITED, "request trigger frequency limit")
        feishu.fail_next("reply", 400, RATE_LIMITED, "request trigger frequency limit")
        feishu.fail_next("reply", 503, 500, "internal error")
        await served.push(served.message("busy?"))
        (reply,) = await served.sent(1)
    assert reply.text == "Hello from Tally."
    assert feishu.calls("reply") == 4


async def test_a_long_reply_arrives_in_ordered_chunks_within_the_limit(
    feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    paragraphs = [f"Paragraph {n}: " + "words " * 120 for n in range(14)]
    reply = "\n\n".join(paragraphs)
    assert len(reply) >= 10_000
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        served.provider.push(reply)
        event = served.message("tell me a lot")
        await served.acked(await served.push(event))
        await served.settle()
        chunks = feishu.sent()
        stored = await served.stored()
    assert len(chunks) >= 3 and all(len(c.text) <= MAX_CHARS for c in chunks)
    assert {c.reply_to for c in chunks} == {event["event"]["message"]["message_id"]}
    assert " ".join(c.text for c in chunks).split() == reply.split()
    assert stored[-1] == ("assistant", reply)


async def test_an_event_that_cannot_be_kept_is_answered_500_and_its_redelivery_once(
    small_disk: Path, tmp_path: Path, feishu: FakeFeishuServer
) -> None:
    database_url = f"sqlite+aiosqlite:///{small_disk / 'tally.db'}"
    async with serving_feishu(feishu, tmp_path, database_url) as served:
        event = served.message("kept at last")
        event["padding"] = "x" * 90_000  # more than SQLite may still find in its pages
        filler = fill(small_disk)
        refused = await served.acked(await served.push(event))
        filler.unlink()
        again = await served.acked(await served.push(event))  # Feishu delivers it again
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert refused["code"] == 500 and again["code"] == 200
    assert reply.text == "Hello from Tally."
    assert stored == [("user", "kept at last"), ("assistant", "Hello from Tally.")]


async def test_a_webhook_event_that_cannot_be_kept_is_503_and_its_retry_answered_once(
    small_disk: Path, tmp_path: Path, feishu: FakeFeishuServer
) -> None:
    database_url = f"sqlite+aiosqlite:///{small_disk / 'tally.db'}"
    bot = feishu_settings(feishu, mode="webhook")
    async with serving_feishu(feishu, tmp_path, database_url, bot=bot) as served:
        event = served.message("kept at last")
        event["padding"] = "x" * 90_000
        filler = fill(small_disk)
        refused = await served.post(event)
        filler.unlink()
        retried = await served.post(event)  # Feishu's retry, signed afresh
        await served.sent(1)
        await served.settle()
        stored = await served.stored()
    assert refused.status_code == 503
    assert retried.status_code == 200
    assert stored == [("user", "kept at last"), ("assistant", "Hello from Tally.")]
    assert len(feishu.sent()) == 1
