"""A Telegram bot end to end: the real python-telegram-bot against a fake Bot API server, in
polling and webhook mode; turns stored exactly as a web turn's; every update answered once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import func, select

from backend.providers.scripted import ScriptedProvider
from backend.storage.tables import channel_updates
from tests.channels.conftest import SECRET, TOKEN, bot_settings, serving_bot
from tests.fakes import HttpError
from tests.fakes.telegram_server import FakeTelegramServer
from tests.waiting import until


async def test_polling_a_message_in_a_reply_out_stored_as_a_web_turn(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_bot(telegram, tmp_path, database_url) as served:
        telegram.push_update(TOKEN, telegram.user_message("Hi there!"))
        (reply,) = await served.sent(1)
        stored = await served.stored()
        commands = telegram.bots[TOKEN].commands
    assert reply.text == "Hello from Tally." and reply.parse_mode == "HTML"
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]
    assert {c["command"] for c in commands} >= {"new", "stop", "summary", "memory", "forget"}
    assert telegram.bots[TOKEN].webhook is None  # polling deleted any webhook


async def test_webhook_registers_checks_the_secret_and_answers(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    bot = bot_settings(telegram, mode="webhook")
    async with serving_bot(telegram, tmp_path, database_url, bot=bot) as served:
        await served.until(lambda t: t.bots[TOKEN].webhook is not None, "setWebhook")
        hook = telegram.bots[TOKEN].webhook or {}
        forged = await served.deliver(telegram.user_message("forged"), secret="wrong")
        missing = await served.deliver(telegram.user_message("no secret"), secret=None)
        rows_after_refusals = await count_updates(served)
        good = await served.deliver(telegram.user_message("Hello by webhook"))
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert hook["url"] == "https://bots.example.com/tg" and hook["secret_token"] == SECRET
    assert (forged.status_code, missing.status_code) == (401, 401)
    assert rows_after_refusals == 0
    assert good.status_code == 200 and reply.text == "Hello from Tally."
    assert stored == [("user", "Hello by webhook"), ("assistant", "Hello from Tally.")]


async def test_a_duplicate_update_is_answered_once(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    bot = bot_settings(telegram, mode="webhook")
    async with serving_bot(telegram, tmp_path, database_url, bot=bot) as served:
        update = telegram.user_message("once please")
        first = await served.deliver(update)
        again = await served.deliver(update)
        await served.sent(1)
        marker = await served.deliver(telegram.user_message("and then this"))
        await served.sent(2)
        stored = await served.stored()
    assert (first.status_code, again.status_code, marker.status_code) == (200, 200, 200)
    assert [text for role, text in stored if role == "user"] == ["once please", "and then this"]
    assert len(telegram.sent(42, "sendMessage")) == 2


async def count_updates(served: object) -> int:
    database = served.app.state.services.database  # type: ignore[attr-defined]
    async with database.read() as conn:
        return int(
            (await conn.execute(select(func.count()).select_from(channel_updates))).scalar_one()
        )


async def test_a_long_reply_arrives_in_ordered_chunks_with_no_fence_broken(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    code = "\n".join(f"print({n})  # <{n}>" for n in range(150))
    long_reply = "\n\n".join(
        [f"Part {n}: " + "lorem ipsum " * 60 for n in range(6)]
        + [f"```python\n{code}\n```"]
        + [f"Part {n}: " + "dolor sit " * 60 for n in range(6, 12)]
    )
    assert len(long_reply) > 10_000
    provider = ScriptedProvider(replies=[long_reply])
    async with serving_bot(telegram, tmp_path, database_url, provider=provider) as served:
        telegram.push_update(TOKEN, telegram.user_message("tell me everything"))
        await served.until(
            lambda t: "Part 11" in "".join(s.text for s in t.sent(42, "sendMessage")), "the end"
        )
        chunks = telegram.sent(42, "sendMessage")
    assert len(chunks) >= 3
    assert all(len(chunk.text) <= 4096 for chunk in chunks)
    assert all(c.text.count("<pre>") == c.text.count("</pre>") for c in chunks)
    text = "".join(c.text for c in chunks)
    assert [text.index(f"Part {n}:") for n in range(12)] == sorted(
        text.index(f"Part {n}:") for n in range(12)
    )


async def test_markup_telegram_rejects_is_sent_again_as_plain_text(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["**Bold** and *odd* markup"])
    async with serving_bot(telegram, tmp_path, database_url, provider=provider) as served:
        telegram.fail_next(
            "sendMessage", HttpError(400, "Bad Request: can't parse entities: unexpected end tag")
        )
        telegram.push_update(TOKEN, telegram.user_message("format me"))
        (plain,) = await served.sent(1)
    assert plain.parse_mode is None and plain.text == "**Bold** and *odd* markup"


async def test_flood_control_retry_after_is_waited_out(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_bot(telegram, tmp_path, database_url) as served:
        telegram.fail_next(
            "sendMessage", HttpError(429, "Too Many Requests: retry after 1", retry_after="1")
        )
        telegram.push_update(TOKEN, telegram.user_message("busy?"))
        (reply,) = await served.sent(1)
    assert reply.text == "Hello from Tally."


@pytest.mark.slow
async def test_an_update_delivered_while_the_bot_connects_is_answered_once(
    telegram: FakeTelegramServer, tmp_path: Path, database_url: str
) -> None:
    telegram.fail_next("setWebhook", HttpError(500, "Internal Server Error"))  # connect retries
    bot = bot_settings(telegram, mode="webhook")
    slow = ScriptedProvider(delay_s=0.05)  # still writing when the connect succeeds, 1 s on
    slow.push("word " * 60, "Hello from Tally.")
    async with serving_bot(telegram, tmp_path, database_url, bot=bot, provider=slow) as served:
        early = await served.deliver(telegram.user_message("are you there yet?"))
        (reply,) = await served.sent(1)
        await served.app.state.channels.get("default", "tg").settle()
        await served.deliver(telegram.user_message("and now?"))
        await served.sent(2)
    assert early.status_code == 200 and reply.text.split() == ["word"] * 60
    assert [m.text for m in telegram.sent(42, "sendMessage")][1:] == ["Hello from Tally."]


async def test_each_update_in_and_reply_out_is_one_log_line_without_the_text(
    telegram: FakeTelegramServer,
    tmp_path: Path,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    bot = bot_settings(telegram, mode="webhook")
    async with serving_bot(telegram, tmp_path, database_url, bot=bot) as served:
        update = telegram.user_message("my secret plan is here")
        await served.deliver(update)
        await served.sent(1)
        await served.deliver(update)  # delivered twice by the platform, answered once
        await until(  # said after the last chunk was counted
            lambda: logged(caplog, "reply out"), "logged: reply out", timeout_s=30, poll_s=0.01
        )
    lines = [r for r in caplog.records if r.name.startswith(("backend.channels", "tally"))]
    ins = [r for r in lines if "update in" in r.getMessage()]
    outs = [r for r in lines if "reply out" in r.getMessage()]
    (turn,) = [r for r in lines if r.getMessage() == "turn completed"]
    assert [r.levelno for r in ins + outs] == [logging.INFO] * 3
    assert "duplicate" in ins[1].getMessage() and len(outs) == 1
    assert {vars(r)["update"] for r in ins + outs} == {str(update["update_id"])}
    assert vars(outs[0])["session"] == vars(turn)["session"]
    assert vars(turn)["channel"] == "telegram" and vars(turn)["outcome"] == "completed"
    assert not any("secret plan" in r.getMessage() + str(vars(r)) for r in caplog.records)


def logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)
