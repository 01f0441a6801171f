"""WeCom's bodies are input too (the bad-update family of `test_bad_updates.py`, in XML): past
a valid signature, every bad message WeCom could post is recorded as refused and answered 200,
so WeCom stops delivering it again; never a 500, never a turn; the app answers the next good
message. The JSON family's probes (a number given as a string, a NUL in a string) mean nothing
in XML, which has no types and cannot carry a NUL; these are its XML counterparts: markup that
is no XML or declares entities, sizes, depths, fields that are no digits or nest, a message
for another corp, ciphertext that is no AES."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from backend.storage.tables import channel_updates
from tests.channels.wecom_fixtures import APP, ServedApp, serving_app
from tests.fakes.wecom_server import FakeWeComServer, signed_query, xml_of

NOW = str(int(time.time()))


def message(**fields: str) -> bytes:
    """A text message from Ada with `fields` replaced (raw XML, not escaped)."""
    values = {
        "ToUserName": f"<![CDATA[{APP.corp_id}]]>",
        "FromUserName": "<![CDATA[ada]]>",
        "CreateTime": NOW,
        "MsgType": "<![CDATA[text]]>",
        "Content": "<![CDATA[hello]]>",
        "MsgId": str(time.time_ns()),
        "AgentID": str(APP.agent_id),
    } | fields
    return ("<xml>" + "".join(f"<{k}>{v}</{k}>" for k, v in values.items()) + "</xml>").encode()


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
    b"<xml><Content>&lol2;</Content></xml>"
)
EXTERNAL = (
    b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><xml><Content>&e;</Content></xml>'
)
REFUSED: dict[str, bytes] = {
    "not_xml": b"{nope",
    "empty": b"",
    "text_only": b"just words",
    "not_utf8": b"<xml><Content>\xff\xfe</Content></xml>",
    "nul_reference": message(Content="hi &#0; there"),
    "undefined_entity": message(Content="&nbsp;"),
    "billion_laughs": BILLION_LAUGHS,
    "external_entity": EXTERNAL,
    "over_1_mib": message(Content="x" * (1024 * 1024 + 1)),
    "nested_40": message(Content="<a>" * 40 + "</a>" * 40),
    "many_elements": message(Content="<a/>" * 3_000),
    "no_msgid": message(MsgId="").replace(b"<MsgId></MsgId>", b""),
    "msgid_letters": message(MsgId="12ab"),
    "msgid_too_long": message(MsgId="1" * 21),
    "msgid_nested": message(MsgId="<x>1</x>"),
    "create_time_letters": message(CreateTime="yesterday"),
    "create_time_negative": message(CreateTime="-1"),
    "create_time_1e400": message(CreateTime="1e400"),
    "from_empty": message(FromUserName=""),
    "from_too_long": message(FromUserName="u" * 1_000),
    "from_nested": message(FromUserName="<id>ada</id>"),
    "content_nested": message(Content="<x>1</x>"),
    "no_msgtype": message(MsgType="").replace(b"<MsgType></MsgType>", b""),
}
ODD_BUT_TEXT = {  # answered, stored as sent
    "line_separator": ("a\u2028b", "a\u2028b"),
    "emoji_and_cjk": ("你好 👋", "你好 👋"),
    "escaped_markup": ("&lt;b&gt;hi&lt;/b&gt; &amp; more", "<b>hi</b> & more"),
}


async def post(served: ServedApp, plaintext: bytes, corp_id: str | None = None) -> tuple[int, str]:
    answer = await served.post(plaintext, corp_id=corp_id)
    assert answer.status_code < 500, answer.text
    return answer.status_code, answer.text


async def post_encrypted(served: ServedApp, encrypted: str) -> int:
    query = signed_query(APP.token, encrypted)
    body = xml_of([("ToUserName", APP.corp_id, True), ("Encrypt", encrypted, True)])
    return (await served.client.post(served.path, params=query, content=body)).status_code


async def test_every_bad_message_is_refused_and_answered_never_a_500(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        refused = {name: await post(served, body) for name, body in REFUSED.items()}
        again = await post(served, REFUSED["msgid_letters"])  # delivered again: recorded once
        other_corp = await post(served, message(), corp_id="ww-another-corp")
        not_aes = [
            await post_encrypted(served, base64.b64encode(b"x" * 31).decode()),  # no AES blocks
            await post_encrypted(served, base64.b64encode(b"y" * 64).decode()),  # bad padding
            await post_encrypted(served, "not base64 !"),
        ]
        for n, (text, _) in enumerate(ODD_BUT_TEXT.values(), start=1):
            await post(served, message(Content=f"<![CDATA[{text}]]>" if "&" not in text else text))
            await served.sent(n)
        good = await post(served, message(Content="<![CDATA[a good one after all that]]>"))
        await served.sent(len(ODD_BUT_TEXT) + 1)
        await served.settle()
        health = (await served.client.get("/api/health")).json()
        async with served.app.state.services.database.read() as conn:
            rows = (
                await conn.execute(
                    select(channel_updates.c.status, channel_updates.c.error).where(
                        channel_updates.c.status == "refused"
                    )
                )
            ).all()
        said = [text for role, text in await served.stored() if role == "user"]
    wrong = {n: a for n, a in refused.items() if a[0] != 200 or "refused" not in a[1]}
    assert wrong == {}
    assert again[0] == 200 and other_corp[0] == 200 and "another corp" in other_corp[1]
    assert not_aes == [200, 200, 200]
    assert len(rows) == len(REFUSED) + 1 + len(not_aes) and all(error for _, error in rows)
    assert said == [stored for _, stored in ODD_BUT_TEXT.values()] + ["a good one after all that"]
    assert good[0] == 200
    (app,) = [c for c in health["channels"] if c["kind"] == "wecom"]
    assert app["last_error"].startswith("refused update")


@pytest.mark.parametrize(
    "body",
    [b"", b"{nope", b"<xml></xml>", b"<xml><Encrypt><a/></Encrypt></xml>", BILLION_LAUGHS],
    ids=["empty", "not_xml", "no_encrypt", "nested_encrypt", "doctype"],
)
async def test_an_envelope_without_a_signed_encrypt_is_401_and_nothing_kept(
    wecom: FakeWeComServer, tmp_path: Path, database_url: str, body: bytes
) -> None:
    async with serving_app(wecom, tmp_path, database_url) as served:
        query = signed_query(APP.token, "")
        answer = await served.client.post(served.path, params=query, content=body)
        async with served.app.state.services.database.read() as conn:
            kept = (await conn.execute(select(channel_updates.c.id))).all()
    assert answer.status_code == 401 and kept == []
