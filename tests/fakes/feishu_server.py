"""A fake Feishu (Lark) open platform: the OpenAPI a bot calls and the long connection's
endpoint and websocket, over real HTTP and a real websocket on 127.0.0.1; and the encryption
and signature Feishu puts on an HTTP event (computed here with `cryptography`, independently of
the SDK that Tally decrypts with).

`base_url` plays `https://open.feishu.cn`. The OpenAPI side issues tenant access tokens, says
who the bot is (`/open-apis/bot/v3/info`), takes replies (`im/v1/messages/{id}/reply`: text,
post or interactive, refused over 30 KB as Feishu does) and serves the pictures of messages
(`.../resources/{key}`). Errors are Feishu's `{"code", "msg"}`; a token it does not know (or
`expire_tokens`) is code 99991663. `POST /callback/ws/endpoint` hands out a one-use websocket
URL (a port of its own) with the four ClientConfig numbers the SDK needs; a test then `push`es
events there as protobuf DATA frames, and every acknowledgement frame is recorded. Pings are
answered with pongs.

`fail_next` scripts one error of a route (HTTP status and code: 429/99991400 is the rate
limit); `drop_connections` cuts the websockets as a network failure would. Thread-safe: the
server runs its own loop in a thread, and the blocking helpers are for `asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import hashlib
import itertools
import json
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

import lark_oapi.ws.client as sdk_ws
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from lark_oapi.ws.pb.pbbp2_pb2 import Frame
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from . import FakeServer, RecordedRequest, Reply

# lark-oapi made an event loop at import (its ws client's); closed at exit unless in use.
_import_loop = sdk_ws.loop
atexit.register(
    lambda: _import_loop.is_running() or _import_loop.is_closed() or _import_loop.close()
)

MAX_CONTENT_BYTES = 30 * 1024  # Feishu refuses a post or card over 30 KB
INVALID_TOKEN = 99991663
RATE_LIMITED = 99991400
ROUTES = ("token", "bot_info", "reply", "resource", "endpoint")


@dataclass(frozen=True)
class App:
    app_id: str
    app_secret: str
    bot_open_id: str
    app_name: str


@dataclass(frozen=True)
class Sent:
    """One reply the bot sent successfully."""

    reply_to: str  # the message it answers
    msg_type: str  # text | post | interactive
    content: dict[str, Any]
    text: str  # the words: a post's md/text elements, a card's markdown
    buttons: list[dict[str, Any]] = field(default_factory=list)  # a card's, with their values
    app_id: str = ""  # whose token it was sent with


@dataclass(frozen=True)
class Failure:
    status: int
    code: int
    msg: str = "scripted failure"


class Refused(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.msg)
        self.failure = failure


# ---- what Feishu does to an HTTP event ----------------------------------------------------------


def encrypt(plain: bytes, encrypt_key: str) -> str:
    """AES-256-CBC with key sha256(Encrypt Key), a random IV before the ciphertext, base64."""
    key = hashlib.sha256(encrypt_key.encode()).digest()
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plain) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + encryptor.update(padded) + encryptor.finalize()).decode()


def encrypted_body(plain: bytes, encrypt_key: str) -> bytes:
    return json.dumps({"encrypt": encrypt(plain, encrypt_key)}).encode()


def signed_headers(
    body: bytes, encrypt_key: str, *, timestamp: int | None = None, nonce: str | None = None
) -> dict[str, str]:
    """The headers Feishu signs an event with: sha256(timestamp + nonce + key + body)."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    once = nonce or secrets.token_hex(8)
    digest = hashlib.sha256((stamp + once + encrypt_key).encode() + body).hexdigest()
    return {
        "X-Lark-Request-Timestamp": stamp,
        "X-Lark-Request-Nonce": once,
        "X-Lark-Signature": digest,
        "Content-Type": "application/json",
    }


class FakeFeishuServer(FakeServer):
    label = "feishu"

    def __init__(self, *, token_expire: int = 7200, **options: Any) -> None:
        super().__init__(**options)
        self._mutex = threading.RLock()
        self._changed = threading.Condition(self._mutex)
        self.token_expire = token_expire
        self.apps: dict[str, App] = {}
        self.resources: dict[tuple[str, str], bytes] = {}
        self._tokens: dict[str, tuple[str, float]] = {}  # token -> (app id, expiry epoch)
        self._tickets: dict[str, str] = {}  # ticket -> app id, until used
        self._handshakes: dict[ServerConnection, str] = {}
        self._links: dict[str, list[ServerConnection]] = {}  # app id -> open, oldest first
        self._opened: dict[str, int] = {}
        self._acks: dict[str, dict[str, Any]] = {}
        self._pings = 0
        self._sent: list[Sent] = []
        self._calls: dict[str, int] = {}
        self._failures: deque[tuple[str, Failure]] = deque()
        self._ids = itertools.count(1)
        self._ws_server: Server | None = None
        self.ws_port = 0

    # -- the test's side: apps, events, resources --

    def add_app(
        self, app_id: str, app_secret: str, *, bot_open_id: str = "ou_bot", name: str = "Tally"
    ) -> App:
        app = App(app_id, app_secret, bot_open_id, name)
        with self._mutex:
            self.apps[app_id] = app
        return app

    def message_event(
        self,
        text: str = "",
        *,
        app_id: str,
        chat_id: str = "oc_p2p_ada",
        chat_type: str = "p2p",
        sender: str = "ou_ada",
        user_id: str = "u_ada",
        mention_bot: bool = False,
        image_key: str | None = None,
        token: str = "",
    ) -> dict[str, Any]:
        """An `im.message.receive_v1` event exactly as Feishu delivers it (schema 2.0)."""
        app = self.apps[app_id]
        mentions = []
        if mention_bot:  # Feishu writes a mention as a key in the text, named in `mentions`
            text = f"@_user_1 {text}"
            mentions.append(
                {
                    "key": "@_user_1",
                    "id": {"open_id": app.bot_open_id, "union_id": "on_bot", "user_id": None},
                    "name": app.app_name,
                    "tenant_key": "tenant-1",
                }
            )
        message_type, content = "text", {"text": text}
        if image_key is not None:
            message_type, content = "image", {"image_key": image_key}
        message: dict[str, Any] = {
            "message_id": f"om_{secrets.token_hex(8)}",
            "root_id": "",
            "parent_id": "",
            "create_time": str(int(time.time() * 1000)),
            "chat_id": chat_id,
            "chat_type": chat_type,
            "message_type": message_type,
            "content": json.dumps(content, ensure_ascii=False),
            "mentions": mentions,
        }
        event = {
            "sender": {
                "sender_id": {"open_id": sender, "user_id": user_id, "union_id": f"on_{sender}"},
                "sender_type": "user",
                "tenant_key": "tenant-1",
            },
            "message": message,
        }
        return self._envelope("im.message.receive_v1", app_id, event, token)

    def card_action(
        self,
        value: dict[str, Any],
        *,
        app_id: str,
        message_id: str,
        chat_id: str = "oc_p2p_ada",
        operator: str = "ou_ada",
        token: str = "",
    ) -> dict[str, Any]:
        """A `card.action.trigger` callback: a button with `value` pressed by `operator`."""
        event = {
            "operator": {"open_id": operator, "user_id": f"u_{operator}", "tenant_key": "t1"},
            "token": secrets.token_hex(8),
            "action": {"value": value, "tag": "button"},
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": chat_id},
        }
        return self._envelope("card.action.trigger", app_id, event, token)

    def _envelope(
        self, event_type: str, app_id: str, event: dict[str, Any], token: str
    ) -> dict[str, Any]:
        header = {
            "event_id": secrets.token_hex(16),
            "event_type": event_type,
            "create_time": str(int(time.time() * 1000)),
            "token": token,
            "app_id": app_id,
            "tenant_key": "tenant-1",
        }
        return {"schema": "2.0", "header": header, "event": event}

    def add_resource(self, message_id: str, key: str, data: bytes) -> None:
        with self._mutex:
            self.resources[(message_id, key)] = data

    def expire_tokens(self) -> None:
        """Every token issued so far is refused from now on (code 99991663)."""
        with self._mutex:
            self._tokens.clear()

    def fail_next(self, route: str, status: int, code: int, msg: str = "scripted") -> None:
        """The next call of `route` (one of ROUTES) answers HTTP `status` with `code`."""
        if route not in ROUTES:
            raise ValueError(f"no route {route!r}")
        with self._mutex:
            self._failures.append((route, Failure(status, code, msg)))

    # -- the test's side: the long connection --

    # The base class's push() queues model replies; a chat platform pushes events instead.
    def push(self, app_id: str, event: dict[str, Any]) -> str:  # type: ignore[override]
        """Send `event` as a DATA frame on the app's newest connection (waiting for one); the
        frame's message_id, which its acknowledgement carries back."""
        return self.push_raw(app_id, json.dumps(event, ensure_ascii=False).encode())

    def push_raw(self, app_id: str, payload: bytes) -> str:
        self._wait(lambda: bool(self._links.get(app_id)), 60.0, lambda: f"{app_id} not connected")
        with self._mutex:
            link = self._links[app_id][-1]
        frame_id = f"frame-{next(self._ids)}-{secrets.token_hex(4)}"
        frame = Frame()
        frame.SeqID, frame.LogID, frame.service, frame.method = next(self._ids), 0, 1, 1
        for key, value in (
            ("type", "event"),
            ("message_id", frame_id),
            ("sum", "1"),
            ("seq", "0"),
            ("trace_id", secrets.token_hex(8)),
        ):
            header = frame.headers.add()
            header.key, header.value = key, value
        frame.payload = payload
        assert self._loop is not None
        sending = link.send(frame.SerializeToString())
        asyncio.run_coroutine_threadsafe(sending, self._loop).result(60)
        return frame_id

    def drop_connections(self, app_id: str) -> None:
        """Cut every connection of the app without a close frame, as a network failure would."""
        with self._changed:
            links = self._links.pop(app_id, [])
            self._changed.notify_all()
        for link in links:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(link.transport.abort)

    def wait_connected(self, app_id: str, count: int = 1, timeout: float = 60.0) -> None:
        """Until the app has opened `count` websocket connections in all (reconnects count)."""
        self._wait(
            lambda: self._opened.get(app_id, 0) >= count and bool(self._links.get(app_id)),
            timeout,
            lambda: f"{app_id} opened {self._opened.get(app_id, 0)} connections, not {count}",
        )

    def wait_open_links(self, app_id: str, count: int, timeout: float = 60.0) -> None:
        """Until exactly `count` of the app's connections are open now (0: all closed)."""
        self._wait(
            lambda: len(self._links.get(app_id, [])) == count,
            timeout,
            lambda: f"{app_id} has {len(self._links.get(app_id, []))} open, not {count}",
        )

    def opened(self, app_id: str) -> int:
        with self._mutex:
            return self._opened.get(app_id, 0)

    def wait_for_ack(self, frame_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """The acknowledgement of frame `frame_id`: its payload, and its headers as `_headers`."""
        self._wait(lambda: frame_id in self._acks, timeout, lambda: f"no ack for {frame_id}")
        with self._mutex:
            return self._acks[frame_id]

    def acks(self) -> dict[str, dict[str, Any]]:
        with self._mutex:
            return dict(self._acks)

    # -- the test's side: what the bot sent --

    def calls(self, route: str) -> int:
        with self._mutex:
            return self._calls.get(route, 0)

    def sent(self, reply_to: str | None = None) -> list[Sent]:
        with self._mutex:
            return [s for s in self._sent if reply_to is None or s.reply_to == reply_to]

    def wait_for_sent(
        self, count: int, *, reply_to: str | None = None, timeout: float = 60.0
    ) -> list[Sent]:
        """Until the bot has sent at least `count` replies (to `reply_to`); those replies."""
        self._wait(
            lambda: len(self.sent(reply_to)) >= count,
            timeout,
            lambda: (
                f"the bot sent {len(self.sent(reply_to))}, not {count}: "
                f"{[s.text[:60] for s in self._sent]}"
            ),
        )
        return self.sent(reply_to)

    def wait_until(
        self, condition: Callable[[Self], bool], what: str, timeout: float = 60.0
    ) -> None:
        self._wait(lambda: condition(self), timeout, lambda: f"no {what}")

    def _wait(self, done: Callable[[], bool], timeout: float, why: Callable[[], str]) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"within {timeout} s: {why()}")
                self._changed.wait(remaining)

    # -- the websocket side, in the server's loop --

    def start(self) -> Self:
        super().start()
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._start_websocket(), self._loop).result(5)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._ws_server is not None:
            asyncio.run_coroutine_threadsafe(self._stop_websocket(), self._loop).result(10)
        super().stop()

    async def _start_websocket(self) -> None:
        self._ws_server = await serve(
            self._on_websocket,
            self.host,
            0,
            process_request=self._check_ticket,
            ping_interval=None,
            close_timeout=2,
        )
        self.ws_port = next(iter(self._ws_server.sockets)).getsockname()[1]

    async def _stop_websocket(self) -> None:
        assert self._ws_server is not None
        with self._mutex:
            links = [link for links in self._links.values() for link in links]
        for link in links:
            link.transport.abort()
        self._ws_server.close()
        async with asyncio.timeout(5):
            await self._ws_server.wait_closed()
        self._ws_server = None

    async def _check_ticket(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        url = urlsplit(request.path)
        query = parse_qs(url.query)
        if url.path != "/ws" or not query.get("device_id") or not query.get("service_id"):
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        with self._mutex:
            app_id = self._tickets.pop(query.get("ticket", [""])[0], None)  # one use
            if app_id is None:
                return connection.respond(HTTPStatus.FORBIDDEN, "invalid ticket\n")
            self._handshakes[connection] = app_id
        return None

    async def _on_websocket(self, connection: ServerConnection) -> None:
        with self._changed:
            app_id = self._handshakes.pop(connection)
            self._links.setdefault(app_id, []).append(connection)
            self._opened[app_id] = self._opened.get(app_id, 0) + 1
            self._changed.notify_all()
        try:
            async for raw in connection:
                await self._on_frame(connection, raw)
        except ConnectionClosed:
            pass
        finally:
            with self._changed:
                if connection in self._links.get(app_id, []):
                    self._links[app_id].remove(connection)
                self._changed.notify_all()

    async def _on_frame(self, connection: ServerConnection, raw: str | bytes) -> None:
        frame = Frame()
        frame.ParseFromString(raw if isinstance(raw, bytes) else raw.encode())
        headers = {h.key: h.value for h in frame.headers}
        if frame.method == 0 and headers.get("type") == "ping":
            pong = Frame()
            pong.CopyFrom(frame)
            for header in pong.headers:
                if header.key == "type":
                    header.value = "pong"
            with self._changed:
                self._pings += 1
                self._changed.notify_all()
            await connection.send(pong.SerializeToString())
            return
        if frame.method == 1:  # an acknowledgement: the frame sent back with its answer
            ack = json.loads(frame.payload or b"{}")
            ack["_headers"] = headers
            with self._changed:
                self._acks[headers.get("message_id", "")] = ack
                self._changed.notify_all()

    # -- the OpenAPI --

    async def route(self, request: RecordedRequest, reply: Reply) -> None:
        try:
            if request.path == "/callback/ws/endpoint" and request.method == "POST":
                await reply.json(200, self._answer("endpoint", self._endpoint, request))
            elif request.path == "/open-apis/auth/v3/tenant_access_token/internal":
                await reply.json(200, self._answer("token", self._token, request))
            elif request.path == "/open-apis/bot/v3/info" and request.method == "GET":
                await reply.json(200, self._answer("bot_info", self._bot_info, request))
            elif request.path.startswith("/open-apis/im/v1/messages/"):
                await self._messages(request, reply)
            else:
                raise Refused(Failure(404, 404, f"no API at {request.method} {request.path}"))
        except Refused as refusal:
            failure = refusal.failure
            body = {"code": failure.code, "msg": failure.msg}
            await reply.json(failure.status, body)

    async def _messages(self, request: RecordedRequest, reply: Reply) -> None:
        parts = request.path.removeprefix("/open-apis/im/v1/messages/").split("/")
        if len(parts) == 2 and parts[1] == "reply" and request.method == "POST":
            await reply.json(200, self._answer("reply", self._reply, request, parts[0]))
        elif len(parts) == 3 and parts[1] == "resources" and request.method == "GET":
            data = self._answer("resource", self._resource, request, parts[0], parts[2])
            await reply.raw(200, data, "image/png")
        else:
            raise Refused(Failure(404, 404, f"no API at {request.method} {request.path}"))

    def _answer(self, name: str, handler: Callable[..., Any], *args: Any) -> Any:
        with self._changed:
            self._calls[name] = self._calls.get(name, 0) + 1
            self._changed.notify_all()
            for index, (route, failure) in enumerate(self._failures):
                if route == name:
                    del self._failures[index]
                    raise Refused(failure)
        return handler(*args)

    def _endpoint(self, request: RecordedRequest) -> object:
        body = _body(request)
        app = self.apps.get(str(body.get("AppID")))
        if app is None or body.get("AppSecret") != app.app_secret:
            return {"code": 1000040351, "msg": "app id or secret invalid"}
        ticket = secrets.token_urlsafe(16)
        with self._mutex:
            self._tickets[ticket] = app.app_id
        url = (
            f"ws://{self.host}:{self.ws_port}/ws?device_id={secrets.token_hex(4)}"
            f"&service_id=1&ticket={ticket}"
        )
        config = {"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0}
        return {
            "code": 0,
            "msg": "ok",
            "data": {"URL": url, "ClientConfig": config | {"PingInterval": 120}},
        }

    def _token(self, request: RecordedRequest) -> object:
        body = _body(request)
        app = self.apps.get(str(body.get("app_id")))
        if app is None or body.get("app_secret") != app.app_secret:
            raise Refused(Failure(400, 10014, "app secret invalid"))
        token = f"t-{secrets.token_hex(12)}"
        with self._mutex:
            self._tokens[token] = (app.app_id, time.time() + self.token_expire)
        return {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": self.token_expire}

    def _app_of(self, request: RecordedRequest) -> App:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        with self._mutex:
            app_id, expires = self._tokens.get(token, ("", 0.0))
            app = self.apps.get(app_id)
        if app is None or expires < time.time():
            raise Refused(Failure(400, INVALID_TOKEN, "Invalid access token for authorization."))
        return app

    def _bot_info(self, request: RecordedRequest) -> object:
        app = self._app_of(request)
        bot = {"activate_status": 2, "app_name": app.app_name, "open_id": app.bot_open_id}
        return {"code": 0, "msg": "ok", "bot": bot}

    def _reply(self, request: RecordedRequest, message_id: str) -> object:
        app = self._app_of(request)
        body = _body(request)
        msg_type, raw = str(body.get("msg_type")), body.get("content")
        if msg_type not in ("text", "post", "interactive") or not isinstance(raw, str):
            raise Refused(Failure(400, 230001, "invalid message content"))
        if len(raw.encode()) > MAX_CONTENT_BYTES:
            raise Refused(Failure(400, 230025, "message content too long"))
        content = json.loads(raw)
        text, buttons = _words(msg_type, content)
        with self._changed:
            self._sent.append(Sent(message_id, msg_type, content, text, buttons, app.app_id))
            self._changed.notify_all()
        return {"code": 0, "msg": "success", "data": {"message_id": f"om_{secrets.token_hex(8)}"}}

    def _resource(self, request: RecordedRequest, message_id: str, key: str) -> bytes:
        self._app_of(request)
        with self._mutex:
            data = self.resources.get((message_id, key))
        if data is None or request.query.get("type") not in ("image", "file"):
            raise Refused(Failure(400, 234003, "File not in msg."))
        return data


def _words(msg_type: str, content: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    if msg_type == "text":
        return str(content.get("text", "")), []
    if msg_type == "post":
        locale = next(iter(content.values())) if content else {}
        return "\n".join(
            str(element.get("text", ""))
            for paragraph in locale.get("content", [])
            for element in paragraph
            if element.get("tag") in ("md", "text")
        ), []
    texts, buttons = [], []
    for element in content.get("elements", []):
        if element.get("tag") == "markdown":
            texts.append(str(element.get("content", "")))
        if element.get("tag") == "action":
            buttons += element.get("actions", [])
    return "\n".join(texts), buttons


def _body(request: RecordedRequest) -> dict[str, Any]:
    return request.body if isinstance(request.body, dict) else {}
