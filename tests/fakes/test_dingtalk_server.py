"""The fake DingTalk platform, driven by the real `dingtalk-stream` SDK over its websocket and by
plain httpx over its OpenAPI and session webhooks."""

from __future__ import annotations

import asyncio
import json
import platform
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote_plus

import dingtalk_stream
import httpx
import pytest
import requests
import websockets
from dingtalk_stream import AckMessage, CallbackMessage, ChatbotMessage

from tests.fakes import HttpError
from tests.fakes.dingtalk_server import MAX_TEXT_CHARS, QPS_LIMITED, FakeDingTalkServer

CLIENT_ID, SECRET, ROBOT = "ding-app-1", "app-secret-1", "ding-robot-1"


@pytest.fixture
def server() -> Iterator[FakeDingTalkServer]:
    with FakeDingTalkServer() as fake:
        fake.add_app(CLIENT_ID, SECRET, ROBOT)
        yield fake


# ---- the real SDK over the websocket ------------------------------------------------------------


class LocalStreamClient(dingtalk_stream.DingTalkStreamClient):  # type: ignore[misc]
    """The SDK's client, opening its connection at the fake (the SDK's own URL is fixed at
    import, and its request has no timeout)."""

    def __init__(self, base_url: str) -> None:
        super().__init__(dingtalk_stream.Credential(CLIENT_ID, SECRET))
        self.base_url = base_url

    def open_connection(self) -> dict[str, Any] | None:
        topics = [{"type": "CALLBACK", "topic": topic} for topic in self.callback_handler_map]
        body = {
            "clientId": self.credential.client_id,
            "clientSecret": self.credential.client_secret,
            "subscriptions": topics,
            "ua": f"dingtalk-sdk-python/test Python/{platform.python_version()}",
            "localIp": self.get_host_ip(),
        }
        url = f"{self.base_url}/v1.0/gateway/connections/open"
        response = requests.post(url, json=body, timeout=5)
        return response.json() if response.ok else None

    def get_host_ip(self) -> str:
        return "127.0.0.1"


class RecordingHandler(dingtalk_stream.ChatbotHandler):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[ChatbotMessage] = []

    async def process(self, callback: CallbackMessage) -> tuple[int, str]:
        self.seen.append(ChatbotMessage.from_dict(callback.data))
        return AckMessage.STATUS_OK, "OK"


async def stop_sdk(task: asyncio.Task[None]) -> None:
    """`start()` catches the first CancelledError and sleeps 10 s: cancel until it is done, and
    end the keepalive and frame tasks it leaves behind."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    leftovers = asyncio.all_tasks() - {asyncio.current_task()}
    for leftover in leftovers:
        leftover.cancel()
    await asyncio.gather(*leftovers, return_exceptions=True)


async def test_the_sdk_receives_a_robot_message_and_acks(server: FakeDingTalkServer) -> None:
    client = LocalStreamClient(server.base_url)
    handler = RecordingHandler()
    client.register_callback_handler(ChatbotMessage.TOPIC, handler)
    task = asyncio.create_task(client.start())
    try:
        message = server.robot_message("hello", robot_code=ROBOT)
        message_id = await asyncio.to_thread(server.push, CLIENT_ID, message)
        ack = await asyncio.to_thread(server.wait_for_ack, message_id)
        assert ack["code"] == AckMessage.STATUS_OK
        assert ack["headers"]["messageId"] == message_id
        [seen] = handler.seen
        assert seen.text.content == "hello"
        assert seen.robot_code == ROBOT and seen.conversation_type == "1"
        assert seen.session_webhook.startswith(f"{server.base_url}/robot/sendBySession?session=")

        # A SYSTEM disconnect: the SDK acks, closes, and opens a new connection at once.
        notice = await asyncio.to_thread(server.push_system_disconnect, CLIENT_ID)
        await asyncio.to_thread(server.wait_for_ack, notice)
        await asyncio.to_thread(server.wait_connected, CLIENT_ID, 2)
        assert server.open_calls == 2
        open_body = server.requests[0].body
        assert open_body["subscriptions"] == [{"type": "CALLBACK", "topic": ChatbotMessage.TOPIC}]
    finally:
        await stop_sdk(task)


async def ticket_url(server: FakeDingTalkServer) -> str:
    """Where connections/open sends a client: the endpoint with a fresh ticket."""
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        body = {"clientId": CLIENT_ID, "clientSecret": SECRET, "subscriptions": []}
        opened = (await http.post("/v1.0/gateway/connections/open", json=body)).json()
    return f"{opened['endpoint']}?ticket={quote_plus(opened['ticket'])}"


async def test_tickets_drops_and_hung_handshakes(server: FakeDingTalkServer) -> None:
    url = await ticket_url(server)
    link = await websockets.connect(url)
    frame_id = await asyncio.to_thread(server.push, CLIENT_ID, {"x": 1})
    frame = json.loads(await link.recv())
    assert frame["type"] == "CALLBACK" and frame["headers"]["messageId"] == frame_id
    assert json.loads(frame["data"]) == {"x": 1}
    await link.send(json.dumps({"code": 200, "headers": {"messageId": frame_id}, "message": "OK"}))
    assert (await asyncio.to_thread(server.wait_for_ack, frame_id))["message"] == "OK"

    server.drop_connections(CLIENT_ID)
    with pytest.raises(websockets.ConnectionClosedError):
        await link.recv()
    for refused_url in (url, url.replace("ticket=", "ticket=x")):  # used, and unknown
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(refused_url)
        assert refused.value.response.status_code == 401

    server.hang_websocket_handshake = True
    url = await ticket_url(server)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await websockets.connect(url)
    assert server.open_calls == 2
    await asyncio.to_thread(server.wait_connected, CLIENT_ID, 1)
    with pytest.raises(AssertionError, match="opened 1 connections, not 2"):
        server.wait_connected(CLIENT_ID, 2, timeout=0.01)


# ---- the OpenAPI and session webhooks, with plain httpx -----------------------------------------


@pytest.fixture
def http(server: FakeDingTalkServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=5) as client:
        yield client


def token(http: httpx.Client) -> dict[str, str]:
    answer = http.post("/v1.0/oauth2/accessToken", json={"appKey": CLIENT_ID, "appSecret": SECRET})
    assert answer.json()["expireIn"] == 7200
    return {"x-acs-dingtalk-access-token": answer.json()["accessToken"]}


def markdown(text: str, title: str = "Tally") -> str:
    return json.dumps({"title": title, "text": text})


def test_tokens_and_robot_sends(server: FakeDingTalkServer, http: httpx.Client) -> None:
    wrong = http.post("/v1.0/oauth2/accessToken", json={"appKey": CLIENT_ID, "appSecret": "x"})
    assert wrong.status_code == 400 and wrong.json()["code"] == "invalidClientSecret"
    headers = token(http)
    assert server.token_requests == 2

    one = {"robotCode": ROBOT, "userIds": ["staff-1"], "msgKey": "sampleMarkdown"}
    assert http.post("/v1.0/robot/oToMessages/batchSend", json=one).status_code == 400
    sent = http.post(
        "/v1.0/robot/oToMessages/batchSend",
        json=one | {"msgParam": markdown("hi")},
        headers=headers,
    )
    assert sent.status_code == 200 and "processQueryKey" in sent.json()
    group = {"robotCode": ROBOT, "openConversationId": "cid-group-1", "msgKey": "sampleMarkdown"}
    long = group | {"msgParam": markdown("x" * (MAX_TEXT_CHARS + 1))}
    refused = http.post("/v1.0/robot/groupMessages/send", json=long, headers=headers)
    assert refused.status_code == 400 and refused.json()["code"] == "invalidParameter.param.invalid"
    ok = group | {"msgParam": markdown("to the group", title="T")}
    assert http.post("/v1.0/robot/groupMessages/send", json=ok, headers=headers).is_success

    [to_user, to_group] = server.wait_for_sent(2)
    assert (to_user.via, to_user.target, to_user.text) == ("batchSend", "staff-1", "hi")
    assert (to_group.via, to_group.target, to_group.title) == ("groupSend", "cid-group-1", "T")

    server.fail_next("batchSend", QPS_LIMITED)
    limited = http.post("/v1.0/robot/oToMessages/batchSend", json=one, headers=headers)
    assert limited.status_code == 403
    assert limited.json()["code"] == "Forbidden.AccessDenied.QpsLimitForApi"
    server.expire_tokens()
    expired = http.post("/v1.0/robot/groupMessages/send", json=ok, headers=headers)
    assert expired.json()["code"] == "InvalidAuthentication"
    assert len(server.sent()) == 2


def test_file_downloads(server: FakeDingTalkServer, http: httpx.Client) -> None:
    server.add_file("dl-1", b"\x89PNG")
    body = {"robotCode": ROBOT, "downloadCode": "dl-1"}
    url = http.post("/v1.0/robot/messageFiles/download", json=body, headers=token(http)).json()
    assert http.get(url["downloadUrl"]).content == b"\x89PNG"
    unknown = body | {"downloadCode": "nope"}
    missing = http.post("/v1.0/robot/messageFiles/download", json=unknown, headers=token(http))
    assert missing.status_code == 404
    assert all(r.headers["host"] == f"127.0.0.1:{server.port}" for r in server.requests)


def test_session_webhooks(server: FakeDingTalkServer, http: httpx.Client) -> None:
    message = server.robot_message(
        "hello", robot_code=ROBOT, conversation_type="2", is_in_at_list=True
    )
    assert message["text"]["content"] == " hello" and message["conversationTitle"]
    webhook = message["sessionWebhook"]
    reply = {"msgtype": "markdown", "markdown": {"title": "Tally", "text": "hi"}}
    assert http.post(webhook, json=reply).json() == {"errcode": 0, "errmsg": "ok"}
    too_long = {"msgtype": "text", "text": {"content": "x" * (MAX_TEXT_CHARS + 1)}}
    assert http.post(webhook, json=too_long).json()["errcode"] == 460101
    server.fail_next("session", errcode=130101)
    assert http.post(webhook, json=reply).json()["errcode"] == 130101
    server.expire_session(webhook)
    assert http.post(webhook, json=reply).json()["errcode"] == 300001

    [sent] = server.sent()
    assert (sent.via, sent.robot_code, sent.text) == ("session", ROBOT, "hi")
    assert sent.target == webhook.rsplit("=", 1)[1]


def test_scripted_failures_and_hangs(server: FakeDingTalkServer, http: httpx.Client) -> None:
    server.fail_next("accessToken", HttpError(500, "boom"))
    assert http.post("/v1.0/oauth2/accessToken", json={}).status_code == 500
    with pytest.raises(ValueError):
        server.fail_next("batchSend", errcode=130101)
    wrong = {"clientId": CLIENT_ID, "clientSecret": "wrong"}
    assert http.post("/v1.0/gateway/connections/open", json=wrong).status_code == 401
    server.hang("open")
    with pytest.raises(httpx.ReadTimeout):
        http.post("/v1.0/gateway/connections/open", json=wrong, timeout=0.3)
    assert server.open_calls == 2
