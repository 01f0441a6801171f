"""The fake WeCom holds to what the real one does, so the bot's tests mean something: tokens
by corp id and secret that expire on request, errcodes with HTTP 200, the 2,048-byte limit,
scripted rate limits, callbacks encrypted as WeCom's documented sample is."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.fakes.wecom_server import App, FakeWeComServer

APP = App("ww-fake", 1000002, "fake-secret", "tok", "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C")


@pytest.fixture
def fake() -> Iterator[FakeWeComServer]:
    with FakeWeComServer() as server:
        server.add_app(APP)
        yield server


def token(fake: FakeWeComServer) -> str:
    answer = httpx.get(
        f"{fake.base_url}/cgi-bin/gettoken",
        params={"corpid": "ww-fake", "corpsecret": "fake-secret"},
    ).json()
    assert answer["errcode"] == 0 and answer["expires_in"] == 7200
    return str(answer["access_token"])


def send(fake: FakeWeComServer, access_token: str, content: str) -> dict[str, object]:
    body = {"touser": "ada", "agentid": 1000002, "msgtype": "text", "text": {"content": content}}
    url = f"{fake.base_url}/cgi-bin/message/send"
    answer: dict[str, object] = httpx.post(
        url, params={"access_token": access_token}, json=body
    ).json()
    return answer


def test_tokens_sends_limits_and_expiry(fake: FakeWeComServer) -> None:
    wrong = httpx.get(
        f"{fake.base_url}/cgi-bin/gettoken", params={"corpid": "ww-fake", "corpsecret": "nope"}
    )
    at = token(fake)
    ok = send(fake, at, "hello")
    too_long = send(fake, at, "字" * 683)  # 2,049 bytes
    fake.fail_next("message/send", 45009)
    limited = send(fake, at, "again")
    fake.expire_tokens()
    expired = send(fake, at, "late")
    unknown = send(fake, "made-up", "who?")
    assert (wrong.status_code, wrong.json()["errcode"]) == (200, 40001)
    assert ok["errcode"] == 0 and too_long["errcode"] == 45002
    assert (limited["errcode"], expired["errcode"], unknown["errcode"]) == (45009, 42001, 40014)
    assert [s.content for s in fake.sent("ada")] == ["hello"]
    assert fake.calls("message/send") == 5


def test_a_callback_decrypts_as_wecom_describes_it() -> None:
    query, body = FakeWeComServer.callback(APP, b"<xml><Content>hi</Content></xml>")
    encrypted = body.split(b"<Encrypt><![CDATA[")[1].split(b"]]>")[0]
    key = base64.b64decode(APP.aes_key + "=")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    plain = decryptor.update(base64.b64decode(encrypted)) + decryptor.finalize()
    plain = plain[: -plain[-1]]
    length = int.from_bytes(plain[16:20], "big")
    assert plain[20 : 20 + length] == b"<xml><Content>hi</Content></xml>"
    assert plain[20 + length :] == b"ww-fake"
    assert set(query) == {"msg_signature", "timestamp", "nonce"}
