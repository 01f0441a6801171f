"""The fake QQ, checked against the SDK (qq-botpy-sdk's own webhook verification) and by plain
httpx and websockets: its signer signs as the SDK verifies, its token and message routes keep
QQ's rules, and its gateway speaks QQ's opcodes, resuming a session with what was missed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
import websockets
from botpy.protocol.transport.webhook_verify import (
    sign_validation_response,
    verify_webhook_signature,
)

from tests.fakes.qq_server import DEDUPLICATED, FakeQQServer, sign, webhook_headers

APP_ID, SECRET = "102000999", "naOC0ocQE3shWLAfffVLB1rhYPG7"


@pytest.fixture
def server() -> Iterator[FakeQQServer]:
    with FakeQQServer() as fake:
        fake.add_app(APP_ID, SECRET)
        yield fake


def test_the_signer_and_the_sdk_agree() -> None:
    body = b'{"op":0}'
    headers = webhook_headers(SECRET, body)
    timestamp, signature = headers["X-Signature-Timestamp"], headers["X-Signature-Ed25519"]
    assert verify_webhook_signature(
        body=body, timestamp=timestamp, signature=signature, bot_secret=SECRET
    )
    assert not verify_webhook_signature(
        body=body + b" ", timestamp=timestamp, signature=signature, bot_secret=SECRET
    )
    answer = sign_validation_response(plain_token="tok", event_ts="1725442341", bot_secret=SECRET)
    assert answer["signature"] == sign(SECRET, b"1725442341tok")


def test_tokens_and_passive_replies_keep_qqs_rules(server: FakeQQServer) -> None:
    with httpx.Client(base_url=server.base_url) as http:
        wrong = http.post("/app/getAppAccessToken", json={"appId": APP_ID, "clientSecret": "no"})
        token = http.post("/app/getAppAccessToken", json={"appId": APP_ID, "clientSecret": SECRET})
        auth = {"Authorization": f"QQBot {token.json()['access_token']}"}
        event = server.private_message("hi", user="u1")
        reply = {"msg_type": 0, "content": "hello", "msg_id": event["d"]["id"], "msg_seq": 1}
        unauthorized = http.post("/v2/users/u1/messages", json=reply)
        first = http.post("/v2/users/u1/messages", json=reply, headers=auth)
        repeated = http.post("/v2/users/u1/messages", json=reply, headers=auth)
        elsewhere = http.post("/v2/users/u2/messages", json=reply | {"msg_seq": 2}, headers=auth)
        me = http.get("/users/@me", headers=auth)
    assert wrong.status_code == 401 and token.json()["expires_in"] == "7200"
    assert unauthorized.status_code == 401 and first.status_code == 200
    assert repeated.json()["code"] == DEDUPLICATED and elsewhere.status_code == 400
    assert me.json()["username"] == "Tally QQ"
    assert [(s.target, s.msg_seq, s.text) for s in server.sent()] == [("u1", 1, "hello")]


async def test_the_gateway_identifies_dispatches_and_resumes_with_what_was_missed(
    server: FakeQQServer,
) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        token = (
            await http.post(
                "/app/getAppAccessToken", json={"appId": APP_ID, "clientSecret": SECRET}
            )
        ).json()["access_token"]
        url = (await http.get("/gateway", headers={"Authorization": f"QQBot {token}"})).json()[
            "url"
        ]
    identify = {"op": 2, "d": {"token": f"QQBot {token}", "intents": 1 << 25, "shard": [0, 1]}}
    async with websockets.connect(url) as ws:
        hello = json.loads(await ws.recv())
        await ws.send(json.dumps(identify))
        ready = json.loads(await ws.recv())
        await asyncio.to_thread(server.push, APP_ID, server.private_message("one"))
        first = json.loads(await ws.recv())
        await ws.send(json.dumps({"op": 1, "d": first["s"]}))
        ack = json.loads(await ws.recv())
    await asyncio.to_thread(server.push, APP_ID, server.private_message("two"))  # while away
    resume = {"token": f"QQBot {token}", "session_id": ready["d"]["session_id"], "seq": 1}
    async with websockets.connect(url) as ws:
        await ws.recv()  # HELLO
        await ws.send(json.dumps({"op": 6, "d": resume}))
        resumed, missed = json.loads(await ws.recv()), json.loads(await ws.recv())
    assert hello["op"] == 10 and hello["d"]["heartbeat_interval"] > 0
    assert (ready["t"], first["d"]["content"], ack["op"]) == ("READY", "one", 11)
    assert (resumed["t"], missed["s"], missed["d"]["content"]) == ("RESUMED", 2, "two")
