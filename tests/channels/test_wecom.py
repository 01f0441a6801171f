"""A WeCom self-built app end to end: callbacks posted as WeCom posts them (encrypted and
signed, computed by the fake on its own) to `/channels/{tenant}/{bot}`, replies through the
fake's `message/send`; turns stored exactly as a web turn's, every message answered once,
anything not WeCom's refused with nothing kept."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import func, select

from backend.channels.wecom.crypto import CallbackCipher, signature
from backend.channels.wecom.format import MAX_BYTES
from backend.storage.tables import channel_updates
from tests.channels.wecom_fixtures import AES_KEY, APP, CORP_ID, TOKEN, ServedApp, serving_app
from tests.fakes.wecom_server import FakeWeComServer, encrypt, signed_query

# WeCom's documented callback sample (developer.work.weixin.qq.com/document/path/90968).
SAMPLE_ENCRYPT = (
    "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUp"
    "j911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue"
    "06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+"
    "3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH"
    "27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8"
    "R07+qN+E7Q=="
)
SAMPLE_ECHOSTR = (
    "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="
)


def test_the_callback_crypto_matches_wecoms_documented_sample() -> None:
    cipher = CallbackCipher(AES_KEY, CORP_ID)
    assert signature(TOKEN, "1409659813", "1372623149", SAMPLE_ENCRYPT) == (
        "477715d11cdb4164915debcba66cb864d751f3e6"
    )
    message = cipher.decrypt(SAMPLE_ENCRYPT)
    assert b"<Content><![CDATA[hello]]></Content>" in message
    assert b"<MsgId>4561255354251345929</MsgId>" in message
    assert signature(TOKEN, "1409659589", "263014780", SAMPLE_ECHOSTR) == (
        "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"
    )
    assert cipher.decrypt(SAMPLE_ECHOSTR) == b"1616140317555161061"
    # The fake's own encryption (tests/fakes/wecom_server.py) is read the same way.
    assert cipher.decrypt(encrypt(AES_KEY, "你好".encode(), CORP_ID)) == "你好".encode()


async def test_the_callback_url_is_verified_with_the_decrypted_echostr(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    echostr = encrypt(AES_KEY, b"1616140317555161061", CORP_ID)
    good = signed_query(TOKEN, echostr) | {"echostr": echostr}
    async with serving_app(wecom, tmp_path, database_url) as served:
        verified = await served.client.get(served.path, params=good)
        forged = await served.client.get(served.path, params=good | {"msg_signature": "0" * 40})
        other = await served.client.get(served.path, params=signed_query("x", echostr))
        nobody = await served.client.get("/channels/default/nobody", params=good)
    assert (verified.status_code, verified.text) == (200, "1616140317555161061")
    assert (forged.status_code, other.status_code, nobody.status_code) == (401, 401, 404)


async def test_a_message_in_a_reply_out_stored_as_a_web_turn(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        message = served.message("Hi there!", msg_id="4561255354251345929")
        acknowledged = await served.post(message)
        kept_when_acknowledged = await kept(served, "4561255354251345929")
        (reply,) = await served.sent(1)
        stored = await served.stored()
    assert (acknowledged.status_code, acknowledged.text) == (200, "")
    assert kept_when_acknowledged
    assert (reply.to_user, reply.agent_id, reply.msgtype) == ("ada", APP.agent_id, "markdown")
    assert reply.content == "Hello from Tally."
    assert stored == [("user", "Hi there!"), ("assistant", "Hello from Tally.")]


async def test_markdown_false_replies_as_text(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    from tests.channels.wecom_fixtures import app_settings

    bot = app_settings(wecom, markdown=False)
    async with serving_app(wecom, tmp_path, database_url, bot=bot) as served:
        await served.post(served.message("plain, please"))
        (reply,) = await served.sent(1)
    assert (reply.msgtype, reply.content) == ("text", "Hello from Tally.")


async def test_a_message_delivered_twice_is_answered_once(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        message = served.message("once please")
        first = await served.post(message)
        again = await served.post(message)  # WeCom's retry: the same MsgId, signed anew
        await served.sent(1)
        await served.post(served.message("and then this"))
        await served.sent(2)
        await served.settle()
        stored = await served.stored()
    assert (first.status_code, again.status_code) == (200, 200)
    assert [text for role, text in stored if role == "user"] == ["once please", "and then this"]
    assert len(wecom.sent()) == 2


async def test_callbacks_not_wecoms_stale_or_for_another_corp_are_refused(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        query, body = wecom.callback(APP, served.message("forged"))
        forged = await served.client.post(
            served.path, params=query | {"msg_signature": "f" * 40}, content=body
        )
        unsigned = await served.client.post(served.path, content=body)
        other_token = await served.post(served.message("x"), token="not-our-token")
        stale = await served.post(served.message("old"), timestamp=int(time.time()) - 3600)
        future = await served.post(served.message("later"), timestamp=int(time.time()) + 3600)
        no_xml = await served.client.post(served.path, params=query, content=b"{nope")
        refused_rows = await count_updates(served)

        another_corp = await served.post(served.message("hi"), corp_id="ww-someone-else")
        doctype = await served.post(
            b'<!DOCTYPE x [<!ENTITY a "aaaa">]><xml><Content>&a;</Content></xml>'
        )
        good = await served.post(served.message("Hello by callback"))
        (reply,) = await served.sent(1)
        await served.settle()
        rows = await count_updates(served)
        stored = await served.stored()
    answers = (forged, unsigned, other_token, stale, future, no_xml)
    assert [a.status_code for a in answers] == [401] * len(answers)
    assert "300 s" in stale.json()["error"]["message"]
    assert refused_rows == 0  # nothing kept of a call that is not WeCom's
    assert another_corp.status_code == 200 and "another corp" in another_corp.json()["refused"]
    assert doctype.status_code == 200 and "DOCTYPE" in doctype.json()["refused"]
    assert good.status_code == 200 and reply.content == "Hello from Tally."
    assert stored == [("user", "Hello by callback"), ("assistant", "Hello from Tally.")]
    assert rows == 2 + 2  # the two refused, the message, and its signature remembered


async def test_the_same_signed_call_replayed_is_answered_once(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        query, body = wecom.callback(APP, served.message("only once"))
        first = await served.client.post(served.path, params=query, content=body)
        replayed = await served.client.post(served.path, params=query, content=body)
        await served.sent(1)
        await served.settle()
        stored = await served.stored()
    assert (first.status_code, replayed.status_code) == (200, 200)
    assert len(wecom.sent()) == 1 and len(stored) == 2


async def test_a_long_reply_arrives_in_ordered_chunks_within_the_limit(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    paragraphs = [f"段落 {n}: " + "文字 words " * 80 for n in range(14)]
    reply = "\n\n".join(paragraphs)
    assert len(reply) > 10_000 and len(reply.encode()) > 4 * MAX_BYTES
    async with serving_app(wecom, tmp_path, database_url) as served:
        served.provider.push(reply)
        await served.post(served.message("tell me a lot"))
        await served.settle()
        chunks = wecom.sent()
        stored = await served.stored()
    assert len(chunks) >= 5 and all(len(c.content.encode()) <= MAX_BYTES for c in chunks)
    assert " ".join(c.content for c in chunks).split() == reply.split()
    assert stored[-1] == ("assistant", reply)


async def test_an_expired_token_is_fetched_again_once(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        await served.post(served.message("first"))
        await served.sent(1)
        tokens_before = wecom.calls("gettoken")
        wecom.expire_tokens()
        await served.post(served.message("second"))
        await served.sent(2)
    assert tokens_before == 1  # cached between sends
    assert wecom.calls("gettoken") == 2  # the expired one replaced once
    assert wecom.calls("message/send") == 3  # refused once (42001), then sent


async def test_rate_limits_are_waited_out(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    wecom.fail_next("message/send", 45009, times=2)
    async with serving_app(wecom, tmp_path, database_url) as served:
        await served.post(served.message("busy?"))
        (reply,) = await served.sent(1)
    assert reply.content == "Hello from Tally."
    assert wecom.calls("message/send") == 3


async def count_updates(served: ServedApp) -> int:
    async with served.app.state.services.database.read() as conn:
        return int(
            (await conn.execute(select(func.count()).select_from(channel_updates))).scalar_one()
        )


async def kept(served: ServedApp, message_id: str) -> bool:
    async with served.app.state.services.database.read() as conn:
        row = await conn.execute(
            select(channel_updates.c.id).where(channel_updates.c.platform_id == message_id)
        )
        return row.first() is not None
