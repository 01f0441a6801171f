"""The fake Slack speaks Slack's wire protocol: the Web API's answers and errors (`ok: false`,
429 with Retry-After), one-use Socket Mode URLs, `hello` on connect, envelopes acknowledged
by id, and an unacknowledged envelope delivered again on the next socket."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from websockets.sync.client import connect

from tests.fakes.slack_server import FakeSlackServer


@pytest.fixture
def slack() -> Iterator[FakeSlackServer]:
    with FakeSlackServer(bot_token="xoxb-1", app_token="xapp-1") as server:
        yield server


def call(slack: FakeSlackServer, method: str, token: str, **body: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(slack.api_url + method, json=body, headers=headers)


def test_the_web_api_checks_tokens_and_rate_limits_with_retry_after(
    slack: FakeSlackServer,
) -> None:
    assert call(slack, "auth.test", "xoxb-1").json()["user_id"] == "UBOT"
    assert call(slack, "auth.test", "xoxb-wrong").json() == {"ok": False, "error": "invalid_auth"}
    assert call(slack, "apps.connections.open", "xoxb-1").json()["error"] == "invalid_auth"
    slack.rate_limit_next("chat.postMessage", retry_after_s=3)
    limited = call(slack, "chat.postMessage", "xoxb-1", channel="C1", text="hi")
    posted = call(slack, "chat.postMessage", "xoxb-1", channel="C1", text="hi", thread_ts="1.2")
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "3")
    assert posted.json()["ok"] and [(s.channel, s.thread_ts) for s in slack.sent()] == [
        ("C1", "1.2")
    ]


def test_a_socket_url_works_once_and_an_unacknowledged_envelope_comes_again(
    slack: FakeSlackServer,
) -> None:
    url = call(slack, "apps.connections.open", "xapp-1").json()["url"]
    with connect(url) as socket:
        assert json.loads(socket.recv(10))["type"] == "hello"
        pushed = threading.Thread(target=slack.push, args=({"type": "event_callback"},))
        pushed.start()
        first = json.loads(socket.recv(10))
        pushed.join()
    with pytest.raises(Exception, match="401"):
        connect(url).close()  # used once
    with connect(call(slack, "apps.connections.open", "xapp-1").json()["url"]) as socket:
        socket.recv(10)  # hello
        again = json.loads(socket.recv(10))
        socket.send(json.dumps({"envelope_id": again["envelope_id"]}))
        slack.wait_for_ack(again["envelope_id"])
    assert first["envelope_id"] == again["envelope_id"]
    assert (first["retry_attempt"], again["retry_attempt"]) == (0, 1)
